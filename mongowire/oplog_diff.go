package mongowire

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// diffNode is one level of a $v: 2 update diff, as mongod writes it to
// the oplog: a document level has d (removed), u (set) and s<field>
// (nested diffs); an array level has a: true, l (new length), u<index>
// and s<index>.
type diffNode struct {
	array bool
	size  int32 // l, or -1
	del   []string
	set   bson.D
	subs  []diffSub
}

type diffSub struct {
	key  string
	node *diffNode
}

func newDiffNode(array bool) *diffNode { return &diffNode{array: array, size: -1} }

func (n *diffNode) sub(key string, array bool) *diffNode {
	for _, s := range n.subs {
		if s.key == key {
			return s.node
		}
	}
	c := newDiffNode(array)
	n.subs = append(n.subs, diffSub{key: key, node: c})
	return c
}

func (n *diffNode) doc() bson.D {
	d := bson.D{}
	if n.array {
		d = append(d, bson.E{Key: "a", Value: true})
		if n.size >= 0 {
			d = append(d, bson.E{Key: "l", Value: n.size})
		}
		for _, e := range n.set {
			d = append(d, bson.E{Key: "u" + e.Key, Value: e.Value})
		}
		for _, s := range n.subs {
			d = append(d, bson.E{Key: "s" + s.key, Value: s.node.doc()})
		}
		return d
	}
	if len(n.del) > 0 {
		rm := bson.D{}
		for _, k := range n.del {
			rm = append(rm, bson.E{Key: k, Value: false})
		}
		d = append(d, bson.E{Key: "d", Value: rm})
	}
	if len(n.set) > 0 {
		d = append(d, bson.E{Key: "u", Value: n.set})
	}
	for _, s := range n.subs {
		d = append(d, bson.E{Key: "s" + s.key, Value: s.node.doc()})
	}
	return d
}

// updateDiff renders an update's description as mongod's nested $v: 2
// diff. The post-image says which levels of a path are arrays.
func updateDiff(u *store.UpdateDescription, post bson.Raw) bson.D {
	root := newDiffNode(false)
	if u == nil {
		return root.doc()
	}
	// walk returns the node that holds the last component of path.
	walk := func(path []string) *diffNode {
		n := root
		cur := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: post}
		for _, c := range path[:len(path)-1] {
			cur = child(cur, c)
			n = n.sub(c, cur.Type == bson.TypeArray)
		}
		return n
	}
	for _, f := range u.UpdatedFields {
		p := diffPath(u, f.Key)
		n := walk(p)
		n.set = append(n.set, bson.E{Key: p[len(p)-1], Value: f.Value})
	}
	for _, f := range u.RemovedFields {
		p := diffPath(u, f)
		n := walk(p)
		n.del = append(n.del, p[len(p)-1])
	}
	for _, t := range u.TruncatedArrays {
		p := diffPath(u, t.Field)
		n := walk(append(p, "")) // the array's own level
		n.array, n.size = true, t.NewSize
	}
	return root.doc()
}

// diffPath splits a dotted path into its components, taking them from
// DisambiguatedPaths when a field name holds a dot or looks like a number.
func diffPath(u *store.UpdateDescription, path string) []string {
	for _, e := range u.DisambiguatedPaths {
		if e.Key != path {
			continue
		}
		var out []string
		if arr, ok := e.Value.(bson.A); ok {
			for _, c := range arr {
				switch v := c.(type) {
				case string:
					out = append(out, v)
				case int32:
					out = append(out, strconv.Itoa(int(v)))
				case int64:
					out = append(out, strconv.FormatInt(v, 10))
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return strings.Split(path, ".")
}

// child is the value of component c of v (a field or an array index).
func child(v bson.RawValue, c string) bson.RawValue {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		if x, err := v.Document().LookupErr(c); err == nil {
			return x
		}
	case bson.TypeArray:
		if i, err := strconv.Atoi(c); err == nil && i >= 0 {
			if x, err := v.Array().IndexErr(uint(i)); err == nil {
				return x
			}
		}
	}
	return bson.RawValue{}
}
