package mql

import (
	"bytes"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// mnode is a value of a document being updated. It stays raw bytes until
// an update reaches inside it; then it is opened into a list of elements,
// and only opened nodes are re-encoded. The elements of an opened node
// keep pointing into the original bytes: a child gets a node of its own
// only when an update touches it, so opening a document costs one
// allocation whatever its size.
type mnode struct {
	raw   bson.RawValue // the value while closed
	open  bool
	isArr bool
	elems []melem // children when open
}

// melem is one child of an open node.
type melem struct {
	key  []byte    // field name (documents only)
	typ  bson.Type // the untouched value: its type and bytes
	val  []byte
	node *mnode // the child once touched or replaced; nil while untouched
}

func (e *melem) value() bson.RawValue {
	if e.node != nil {
		return e.node.value()
	}
	return bson.RawValue{Type: e.typ, Value: e.val}
}

func rawNode(v bson.RawValue) *mnode { return &mnode{raw: v} }

func newDocNode() *mnode { return &mnode{open: true} }

func (n *mnode) typ() bson.Type {
	if !n.open {
		return n.raw.Type
	}
	if n.isArr {
		return bson.TypeArray
	}
	return bson.TypeEmbeddedDocument
}

func (n *mnode) isContainer() bool {
	t := n.typ()
	return t == bson.TypeEmbeddedDocument || t == bson.TypeArray
}

// load opens a closed document or array.
func (n *mnode) load() {
	if n.open {
		return
	}
	n.open = true
	n.isArr = n.raw.Type == bson.TypeArray
	count := 0
	it := iterDoc(n.raw.Value)
	for {
		if _, _, ok := it.next(); !ok {
			break
		}
		count++
	}
	n.elems = make([]melem, count, count+1)
	it = iterDoc(n.raw.Value)
	for i := range n.elems {
		k, v, _ := it.next()
		e := &n.elems[i]
		if !n.isArr {
			e.key = k
		}
		e.typ, e.val = v.Type, v.Value
	}
	n.raw = bson.RawValue{}
}

// len is the number of children of an open node.
func (n *mnode) len() int { return len(n.elems) }

// at returns child i of an open node, giving it a node of its own.
func (n *mnode) at(i int) *mnode {
	e := &n.elems[i]
	if e.node == nil {
		e.node = rawNode(bson.RawValue{Type: e.typ, Value: e.val})
	}
	return e.node
}

// setAt replaces child i of an open node.
func (n *mnode) setAt(i int, c *mnode) { n.elems[i].node = c }

// valueAt is child i of an open node, encoded.
func (n *mnode) valueAt(i int) bson.RawValue { return n.elems[i].value() }

// index is the position of the child named key (an index for arrays),
// or -1.
func (n *mnode) index(key string) int {
	n.load()
	if n.isArr {
		i, ok := arrayIndex(key)
		if !ok || i >= len(n.elems) {
			return -1
		}
		return i
	}
	for i := range n.elems {
		if string(n.elems[i].key) == key {
			return i
		}
	}
	return -1
}

// child returns the child named key (an index for arrays), or nil.
func (n *mnode) child(key string) *mnode {
	i := n.index(key)
	if i < 0 {
		return nil
	}
	return n.at(i)
}

// childValue returns the value of the child named key, or missing,
// without giving the child a node of its own.
func (n *mnode) childValue(key string) bson.RawValue {
	i := n.index(key)
	if i < 0 {
		return missing
	}
	return n.valueAt(i)
}

// set replaces or appends the child key; arrays are padded with nulls.
func (n *mnode) set(key string, c *mnode) {
	n.load()
	if n.isArr {
		i, _ := arrayIndex(key)
		for len(n.elems) <= i {
			n.elems = append(n.elems, melem{typ: bson.TypeNull})
		}
		n.elems[i].node = c
		return
	}
	if i := n.index(key); i >= 0 {
		n.elems[i].node = c
		return
	}
	n.elems = append(n.elems, melem{key: []byte(key), node: c})
}

// setValue sets the child key to the value v, padding arrays with nulls.
// Setting a closed child to the bytes it already has changes nothing, so
// that a no-op update re-encodes to the same document.
func (n *mnode) setValue(key string, v bson.RawValue) {
	i := n.index(key)
	if i < 0 {
		n.set(key, rawNode(v))
		return
	}
	e := &n.elems[i]
	cur := bson.RawValue{Type: e.typ, Value: e.val}
	if e.node != nil {
		if e.node.open {
			cur = missing
		} else {
			cur = e.node.raw
		}
	}
	if cur.Type == v.Type && bytes.Equal(cur.Value, v.Value) {
		return
	}
	e.typ, e.val, e.node = v.Type, v.Value, nil
}

// remove deletes a document field; in an array the element becomes null.
func (n *mnode) remove(key string) {
	i := n.index(key)
	if i < 0 {
		return
	}
	if n.isArr {
		n.elems[i] = melem{typ: bson.TypeNull}
		return
	}
	n.elems = append(n.elems[:i:i], n.elems[i+1:]...)
}

// value encodes the node.
func (n *mnode) value() bson.RawValue {
	if !n.open {
		return n.raw
	}
	if n.isArr {
		idx, b := bsoncore.AppendArrayStart(nil)
		for i := range n.elems {
			b = appendElem(b, strconv.Itoa(i), n.elems[i].value())
		}
		b, _ = bsoncore.AppendArrayEnd(b, idx)
		return bson.RawValue{Type: bson.TypeArray, Value: b}
	}
	return vDoc(n.encodeDoc(nil))
}

func (n *mnode) encodeDoc(dst []byte) []byte {
	idx, b := bsoncore.AppendDocumentStart(dst)
	for i := range n.elems {
		e := &n.elems[i]
		typ, val := e.typ, e.val
		if e.node != nil {
			v := e.node.value()
			typ, val = v.Type, v.Value
		}
		if typ == 0 {
			continue
		}
		b = append(b, byte(typ))
		b = append(b, e.key...)
		b = append(b, 0)
		b = append(b, val...)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// values returns the array's elements as values.
func (n *mnode) values() []bson.RawValue {
	n.load()
	out := make([]bson.RawValue, len(n.elems))
	for i := range n.elems {
		out[i] = n.elems[i].value()
	}
	return out
}

func (n *mnode) setValues(vals []bson.RawValue) {
	n.load()
	n.elems = n.elems[:0]
	for _, v := range vals {
		n.elems = append(n.elems, melem{typ: v.Type, val: v.Value})
	}
}
