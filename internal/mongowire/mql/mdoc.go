package mql

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// mnode is a value of a document being updated. It stays raw bytes until
// an update reaches inside it; then it is opened into children, and only
// opened nodes are re-encoded.
type mnode struct {
	raw   bson.RawValue // the value while closed
	open  bool
	isArr bool
	keys  [][]byte // field names when open and a document
	kids  []*mnode // children when open
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
	// One allocation for all the keys and one for all the child nodes.
	count := 0
	it := iterDoc(n.raw.Value)
	for {
		if _, _, ok := it.next(); !ok {
			break
		}
		count++
	}
	block := make([]mnode, count)
	n.kids = make([]*mnode, 0, count+1)
	if !n.isArr {
		n.keys = make([][]byte, 0, count+1)
	}
	it = iterDoc(n.raw.Value)
	for i := 0; i < count; i++ {
		k, v, _ := it.next()
		if !n.isArr {
			n.keys = append(n.keys, k)
		}
		block[i].raw = v
		n.kids = append(n.kids, &block[i])
	}
	n.raw = bson.RawValue{}
}

// child returns the child named key (an index for arrays), or nil.
func (n *mnode) child(key string) *mnode {
	n.load()
	if n.isArr {
		i, ok := arrayIndex(key)
		if !ok || i >= len(n.kids) {
			return nil
		}
		return n.kids[i]
	}
	for i, k := range n.keys {
		if string(k) == key {
			return n.kids[i]
		}
	}
	return nil
}

// set replaces or appends the child key; arrays are padded with nulls.
func (n *mnode) set(key string, c *mnode) {
	n.load()
	if n.isArr {
		i, _ := arrayIndex(key)
		for len(n.kids) <= i {
			n.kids = append(n.kids, rawNode(nullValue))
		}
		n.kids[i] = c
		return
	}
	for i, k := range n.keys {
		if string(k) == key {
			n.kids[i] = c
			return
		}
	}
	n.keys = append(n.keys, []byte(key))
	n.kids = append(n.kids, c)
}

// remove deletes a document field; in an array the element becomes null.
func (n *mnode) remove(key string) {
	n.load()
	if n.isArr {
		if i, ok := arrayIndex(key); ok && i < len(n.kids) {
			n.kids[i] = rawNode(nullValue)
		}
		return
	}
	for i, k := range n.keys {
		if string(k) == key {
			n.keys = append(n.keys[:i:i], n.keys[i+1:]...)
			n.kids = append(n.kids[:i:i], n.kids[i+1:]...)
			return
		}
	}
}

// value encodes the node.
func (n *mnode) value() bson.RawValue {
	if !n.open {
		return n.raw
	}
	if n.isArr {
		idx, b := bsoncore.AppendArrayStart(nil)
		for i, k := range n.kids {
			b = appendElem(b, strconv.Itoa(i), k.value())
		}
		b, _ = bsoncore.AppendArrayEnd(b, idx)
		return bson.RawValue{Type: bson.TypeArray, Value: b}
	}
	return vDoc(n.encodeDoc(nil))
}

func (n *mnode) encodeDoc(dst []byte) []byte {
	idx, b := bsoncore.AppendDocumentStart(dst)
	for i, k := range n.kids {
		v := k.value()
		if v.Type == 0 {
			continue
		}
		b = append(b, byte(v.Type))
		b = append(b, n.keys[i]...)
		b = append(b, 0)
		b = append(b, v.Value...)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// elems returns the array's elements as values (load first).
func (n *mnode) elems() []bson.RawValue {
	n.load()
	out := make([]bson.RawValue, len(n.kids))
	for i, k := range n.kids {
		out[i] = k.value()
	}
	return out
}

func (n *mnode) setElems(vals []bson.RawValue) {
	n.load()
	n.kids = n.kids[:0]
	for _, v := range vals {
		n.kids = append(n.kids, rawNode(v))
	}
}
