package transform

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The field transforms (drop_fields, keep_fields, rename_fields,
// mask_fields) rewrite raw BSON in one pass, guided by a trie of the
// dotted paths they name. A document none of whose top-level fields is
// named comes back as it was, without a copy: that is why a drop of one
// field costs little more than no transform.

type fieldKind uint8

const (
	dropKind fieldKind = iota
	keepKind
	renameKind
	maskKind
)

// node is one step of the dotted paths of a field transform.
type node struct {
	children map[string]*node
	names    []string // the children's names, for a search faster than the map's hash when there are few
	kids     []*node
	leaf     bool                                           // a path ends here
	rename   string                                         // renameKind: the new name of the field
	mask     func(bson.RawValue) (bson.Type, []byte, error) // maskKind: the new value
}

func (n *node) add(path string) (*node, error) {
	if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
		return nil, fmt.Errorf("%q is not a field path: names joined by dots", path)
	}
	for _, part := range strings.Split(path, ".") {
		if n.leaf {
			return n, nil // a shorter path already covers it
		}
		if n.children == nil {
			n.children = map[string]*node{}
		}
		c := n.children[part]
		if c == nil {
			c = &node{}
			n.children[part] = c
			n.names, n.kids = append(n.names, part), append(n.kids, c)
		}
		n = c
	}
	n.leaf, n.children, n.names, n.kids = true, nil, nil, nil
	return n, nil
}

// child returns the child named key, or nil.
func (n *node) child(key []byte) *node {
	if len(n.names) > 8 {
		return n.children[string(key)]
	}
	for i, name := range n.names {
		if name == string(key) {
			return n.kids[i]
		}
	}
	return nil
}

// fields is a compiled field transform.
type fields struct {
	kind fieldKind
	root *node
}

var errBadBSON = errors.New("malformed BSON document")

// apply returns doc rewritten, or doc itself when nothing changes. A nil
// doc stays nil. The elements before the first one the transform names
// are copied in one piece; a drop of whole fields moves the runs between
// them over them, in place, without a copy of the document.
func (f *fields) apply(doc []byte) ([]byte, error) {
	if len(doc) < 5 {
		return doc, nil
	}
	if n := int(binary.LittleEndian.Uint32(doc)); n >= 5 && n < len(doc) {
		// Its own length says less: another field of the change shared
		// these bytes, and a drop in place shortened them.
		doc = doc[:n:n]
	}
	body := doc[4 : len(doc)-1]
	first := -1 // offset in body of the first element the transform changes
	// The fields to drop, when every change is the drop of a whole
	// top-level field and there are few: their spans in body.
	var spanBuf [8][2]int
	spans := spanBuf[:0]
	spansOnly := true
	for off := 0; off < len(body); {
		el, _, ok := bsoncore.ReadElement(body[off:])
		if !ok {
			return nil, errBadBSON
		}
		c := f.root.child(el.KeyBytes())
		touched := c != nil
		if f.kind == keepKind {
			touched = c == nil || !c.leaf
		}
		if touched {
			if first < 0 {
				first = off
			}
			if f.kind != dropKind || !c.leaf || len(spans) == cap(spans) {
				spansOnly = false
				break
			}
			spans = append(spans, [2]int{off, off + len(el)})
		}
		off += len(el)
	}
	if first < 0 {
		return doc, nil
	}
	if spansOnly {
		// In place: the change owns its document (a source never reuses
		// the memory of an event it handed out).
		w := spans[0][0]
		for i, sp := range spans {
			end := len(body)
			if i+1 < len(spans) {
				end = spans[i+1][0]
			}
			w += copy(body[w:], body[sp[1]:end])
		}
		out := doc[:4+w+1]
		out[len(out)-1] = 0
		binary.LittleEndian.PutUint32(out, uint32(len(out)))
		return out, nil
	}
	out := make([]byte, 4, len(doc)+64)
	out = append(out, body[:first]...)
	out, err := f.elements(out, body[first:], f.root, false)
	if err != nil {
		return nil, err
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, nil
}

// document appends doc, rewritten under n, to dst: as an array when
// array is set (keys are then indexes, renumbered after a drop).
func (f *fields) document(dst, doc []byte, n *node, array bool) ([]byte, error) {
	if len(doc) < 5 {
		return nil, errBadBSON
	}
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst, err := f.elements(dst, doc[4:len(doc)-1], n, array)
	if err != nil {
		return nil, err
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

// elements appends the elements of a document's body, rewritten under n.
func (f *fields) elements(dst, body []byte, n *node, array bool) ([]byte, error) {
	rem := body
	i := 0 // the next array index
	var num [20]byte
	for len(rem) > 0 {
		el, rest, ok := bsoncore.ReadElement(rem)
		if !ok {
			return nil, errBadBSON
		}
		rem = rest
		key := el.KeyBytes()
		val := el.Value()
		if array {
			key = strconv.AppendInt(num[:0], int64(i), 10)
		}
		c := n // an array's elements are what the path goes through
		if !array {
			c = n.child(key)
		}
		switch {
		case array && val.Type == bsoncore.TypeEmbeddedDocument:
			var err error
			dst = appendHeader(dst, val.Type, key)
			if dst, err = f.document(dst, val.Data, n, false); err != nil {
				return nil, err
			}
		case array:
			if f.kind == keepKind {
				continue // a scalar has none of the kept fields
			}
			dst = append(appendHeader(dst, val.Type, key), val.Data...)
		case c == nil:
			if f.kind == keepKind {
				continue
			}
			dst = append(dst, el...)
		case c.leaf:
			switch f.kind {
			case dropKind:
				continue
			case keepKind:
				dst = append(dst, el...)
			case renameKind:
				dst = append(appendHeader(dst, val.Type, []byte(c.rename)), val.Data...)
			case maskKind:
				t, b, err := c.mask(bson.RawValue{Type: bson.Type(val.Type), Value: val.Data})
				if err != nil {
					return nil, fmt.Errorf("mask %s: %w", string(key), err)
				}
				dst = append(appendHeader(dst, bsoncore.Type(t), key), b...)
			}
		case val.Type == bsoncore.TypeEmbeddedDocument || val.Type == bsoncore.TypeArray:
			var err error
			dst = appendHeader(dst, val.Type, key)
			if dst, err = f.document(dst, val.Data, c, val.Type == bsoncore.TypeArray); err != nil {
				return nil, err
			}
		default: // a scalar where the path goes deeper
			if f.kind == keepKind {
				continue
			}
			dst = append(dst, el...)
		}
		i++
	}
	return dst, nil
}

// appendHeader appends an element's type and key.
func appendHeader(dst []byte, t bsoncore.Type, key []byte) []byte {
	dst = append(dst, byte(t))
	dst = append(dst, key...)
	return append(dst, 0)
}

// walk follows path (dotted) down the trie, passing over array indexes
// the trie does not name. It returns the node reached, how many parts
// were consumed, and the parts.
func (f *fields) walk(path string) (n *node, used int, parts []string) {
	parts = strings.Split(path, ".")
	n = f.root
	for used < len(parts) && !n.leaf {
		c := n.children[parts[used]]
		if c == nil {
			if isIndex(parts[used]) && used > 0 {
				used++
				continue
			}
			return n, used, parts
		}
		n = c
		used++
	}
	return n, used, parts
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pathAction is what a field transform does to a dotted path of an
// update description.
type pathAction uint8

const (
	pathKeep    pathAction = iota // as it is
	pathRemove                    // dropped
	pathRename                    // renamed: newPath
	pathMask                      // its value is masked
	pathDescend                   // its value holds named fields: rewrite it under the node
)

func (f *fields) path(path string) (act pathAction, newPath string, n *node) {
	n, used, parts := f.walk(path)
	switch {
	case n.leaf: // the path is, or is inside, a named field
		switch f.kind {
		case dropKind:
			return pathRemove, "", n
		case renameKind:
			// The named field is parts[used-1].
			parts[used-1] = n.rename
			return pathRename, strings.Join(parts, "."), n
		case maskKind:
			return pathMask, "", n
		}
		return pathKeep, "", n
	case used == len(parts) && used > 0: // a field that holds named ones
		return pathDescend, "", n
	}
	if f.kind == keepKind {
		return pathRemove, "", n
	}
	return pathKeep, "", n
}

// updateDesc rewrites an update description: the keys of
// updatedFields, the paths of removedFields and truncatedArrays.
func (f *fields) updateDesc(desc []byte) ([]byte, error) {
	if desc == nil {
		return nil, nil
	}
	raw := bson.Raw(desc)
	elems, err := raw.Elements()
	if err != nil {
		return nil, fmt.Errorf("update description: %w", err)
	}
	idx, dst := bsoncore.AppendDocumentStart(make([]byte, 0, len(desc)))
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "updatedFields":
			doc, ok := v.DocumentOK()
			if !ok {
				dst = append(dst, e...)
				continue
			}
			if dst, err = f.updatedFields(dst, doc); err != nil {
				return nil, err
			}
		case "removedFields", "truncatedArrays":
			arr, ok := v.ArrayOK()
			if !ok {
				dst = append(dst, e...)
				continue
			}
			if dst, err = f.pathList(dst, e.Key(), bson.Raw(arr)); err != nil {
				return nil, err
			}
		default:
			dst = append(dst, e...)
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

func (f *fields) updatedFields(dst []byte, doc bson.Raw) ([]byte, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "updatedFields")
	idx, dst := bsoncore.AppendDocumentStart(dst)
	for _, e := range elems {
		v := e.Value()
		act, newPath, n := f.path(e.Key())
		switch act {
		case pathKeep:
			dst = append(dst, e...)
		case pathRemove:
		case pathRename:
			dst = bsoncore.AppendValueElement(dst, newPath, bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
		case pathMask:
			t, b, err := n.mask(v)
			if err != nil {
				return nil, fmt.Errorf("mask %s: %w", e.Key(), err)
			}
			dst = bsoncore.AppendValueElement(dst, e.Key(), bsoncore.Value{Type: bsoncore.Type(t), Data: b})
		case pathDescend:
			if v.Type != bson.TypeEmbeddedDocument && v.Type != bson.TypeArray {
				if f.kind != keepKind {
					dst = append(dst, e...)
				}
				continue
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.Type(v.Type), e.Key())
			if dst, err = f.document(dst, v.Value, n, v.Type == bson.TypeArray); err != nil {
				return nil, err
			}
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

// pathList rewrites removedFields (strings) or truncatedArrays
// ({field, newSize} documents).
func (f *fields) pathList(dst []byte, key string, arr bson.Raw) ([]byte, error) {
	vals, err := arr.Values()
	if err != nil {
		return nil, err
	}
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
	idx, dst := bsoncore.AppendArrayStart(dst)
	i := 0
	for _, v := range vals {
		path, isString := v.StringValueOK()
		var doc bson.Raw
		if !isString {
			var ok bool
			if doc, ok = v.DocumentOK(); ok {
				path, _ = doc.Lookup("field").StringValueOK()
			}
		}
		act, newPath, _ := f.path(path)
		if act == pathRemove {
			continue
		}
		name := fmt.Sprint(i)
		i++
		switch {
		case act != pathRename:
			dst = bsoncore.AppendValueElement(dst, name, bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
		case isString:
			dst = bsoncore.AppendStringElement(dst, name, newPath)
		default:
			sub := bson.D{{Key: "field", Value: newPath}}
			if ns, err := doc.LookupErr("newSize"); err == nil {
				sub = append(sub, bson.E{Key: "newSize", Value: ns})
			}
			_, b, err := bson.MarshalValue(sub)
			if err != nil {
				return nil, err
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, name)
			dst = append(dst, b...)
		}
	}
	return bsoncore.AppendArrayEnd(dst, idx)
}
