package transform

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// BSON reaches CEL without being converted up front: a document is a
// docVal, a map whose fields are looked up in the raw bytes when an
// expression asks for them, so that `doc.status != "draft"` on a 1 KiB
// document reads one field and allocates almost nothing. Scalars are
// converted when read, by the table of the package documentation.

// celValue converts one BSON value to CEL.
func celValue(v bson.RawValue) ref.Val {
	switch v.Type {
	case bson.TypeInt32:
		return types.Int(v.Int32())
	case bson.TypeInt64:
		return types.Int(v.Int64())
	case bson.TypeDouble:
		return types.Double(v.Double())
	case bson.TypeString:
		return types.String(v.StringValue())
	case bson.TypeBoolean:
		return types.Bool(v.Boolean())
	case bson.TypeDateTime:
		return types.Timestamp{Time: time.UnixMilli(v.DateTime()).UTC()}
	case bson.TypeTimestamp:
		t, _ := v.Timestamp()
		return types.Timestamp{Time: time.Unix(int64(t), 0).UTC()}
	case bson.TypeObjectID:
		id := v.ObjectID()
		return types.String(hex.EncodeToString(id[:]))
	case bson.TypeBinary:
		_, data := v.Binary()
		return types.Bytes(data)
	case bson.TypeNull, bson.TypeUndefined:
		return types.NullValue
	case bson.TypeEmbeddedDocument:
		return docVal(v.Document())
	case bson.TypeArray:
		return arrayVal(v.Array())
	case bson.TypeDecimal128:
		d := v.Decimal128()
		if f, ok := exactFloat(d); ok {
			return types.Double(f)
		}
		return types.String(d.String())
	}
	// Regular expressions, JavaScript, min/max keys and the like: their
	// canonical Extended JSON, as a string.
	return types.String(v.String())
}

// exactFloat returns d as a float64 when the conversion loses nothing.
func exactFloat(d bson.Decimal128) (float64, bool) {
	r, ok := new(big.Rat).SetString(d.String())
	if !ok {
		return 0, false
	}
	f, exact := r.Float64()
	return f, exact
}

// docVal is a BSON document as a CEL map(string, dyn). A missing field
// reads as null, as a BSON null does.
type docVal bson.Raw

var (
	_ traits.Mapper = docVal(nil)
	_ traits.Lister = arrayVal(nil)
)

func (d docVal) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeFor[bson.Raw]() {
		return bson.Raw(d), nil
	}
	return d.eager().ConvertToNative(t)
}

func (d docVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return d
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to %s", t)
}

func (d docVal) Equal(other ref.Val) ref.Val {
	if o, ok := other.(docVal); ok && bytes.Equal(d, o) {
		return types.True
	}
	return d.eager().Equal(other)
}

func (d docVal) Type() ref.Type { return types.MapType }
func (d docVal) Value() any     { return bson.Raw(d) }

func (d docVal) Contains(key ref.Val) ref.Val {
	_, found := d.Find(key)
	return types.Bool(found)
}

func (d docVal) Get(key ref.Val) ref.Val {
	v, _ := d.Find(key)
	return v
}

// Find returns the field named key; a missing field is null, and found.
func (d docVal) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	v, err := bson.Raw(d).LookupErr(string(k))
	if err != nil {
		return types.NullValue, true
	}
	return celValue(v), true
}

func (d docVal) Size() ref.Val {
	elems, err := bson.Raw(d).Elements()
	if err != nil {
		return types.NewErr("document: %v", err)
	}
	return types.Int(len(elems))
}

func (d docVal) Iterator() traits.Iterator {
	elems, _ := bson.Raw(d).Elements()
	keys := make([]string, len(elems))
	for i, e := range elems {
		keys[i] = e.Key()
	}
	return types.NewStringList(types.DefaultTypeAdapter, keys).Iterator()
}

// eager converts the whole document into a CEL map, for what a lazy
// view does not do itself (comparing with a map literal).
func (d docVal) eager() traits.Mapper {
	m := map[ref.Val]ref.Val{}
	elems, _ := bson.Raw(d).Elements()
	for _, e := range elems {
		m[types.String(e.Key())] = celValue(e.Value())
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m)
}

// arrayVal is a BSON array as a CEL list.
type arrayVal bson.Raw

func (a arrayVal) list() traits.Lister {
	vals, _ := bson.Raw(a).Values()
	elems := make([]ref.Val, len(vals))
	for i, v := range vals {
		elems[i] = celValue(v)
	}
	return types.NewRefValList(types.DefaultTypeAdapter, elems)
}

func (a arrayVal) ConvertToNative(t reflect.Type) (any, error) { return a.list().ConvertToNative(t) }
func (a arrayVal) ConvertToType(t ref.Type) ref.Val            { return a.list().ConvertToType(t) }
func (a arrayVal) Equal(other ref.Val) ref.Val                 { return a.list().Equal(other) }
func (a arrayVal) Type() ref.Type                              { return types.ListType }
func (a arrayVal) Value() any                                  { return bson.Raw(a) }
func (a arrayVal) Add(other ref.Val) ref.Val                   { return a.list().Add(other) }
func (a arrayVal) Contains(v ref.Val) ref.Val                  { return a.list().Contains(v) }
func (a arrayVal) Get(i ref.Val) ref.Val                       { return a.list().Get(i) }
func (a arrayVal) Iterator() traits.Iterator                   { return a.list().Iterator() }
func (a arrayVal) Size() ref.Val {
	vals, err := bson.Raw(a).Values()
	if err != nil {
		return types.NewErr("array: %v", err)
	}
	return types.Int(len(vals))
}

// bsonValue converts the result of a set expression to a BSON value.
func bsonValue(v ref.Val) (bson.Type, []byte, error) {
	switch v := v.(type) {
	case types.String:
		return bson.TypeString, stringValue([]byte(v)), nil
	case types.Int:
		if int64(v) == int64(int32(v)) { // as BSON writes a small Go int
			return bson.TypeInt32, binary.LittleEndian.AppendUint32(nil, uint32(int32(v))), nil
		}
		return bson.TypeInt64, binary.LittleEndian.AppendUint64(nil, uint64(v)), nil
	case types.Uint:
		if uint64(v) > 1<<63-1 {
			return 0, nil, fmt.Errorf("uint %d does not fit a BSON int64", uint64(v))
		}
		return bson.MarshalValue(int64(v))
	case types.Double:
		return bson.TypeDouble, binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(v))), nil
	case types.Bool:
		if v {
			return bson.TypeBoolean, []byte{1}, nil
		}
		return bson.TypeBoolean, []byte{0}, nil
	case types.Null:
		return bson.TypeNull, nil, nil
	case types.Bytes:
		return bson.MarshalValue(bson.Binary{Data: []byte(v)})
	case types.Timestamp:
		return bson.MarshalValue(bson.NewDateTimeFromTime(v.Time))
	case docVal:
		return bson.TypeEmbeddedDocument, []byte(v), nil
	case arrayVal:
		return bson.TypeArray, []byte(v), nil
	case traits.Lister:
		var arr bson.D
		it := v.Iterator()
		for i := 0; it.HasNext() == types.True; i++ {
			t, b, err := bsonValue(it.Next())
			if err != nil {
				return 0, nil, err
			}
			arr = append(arr, bson.E{Key: fmt.Sprint(i), Value: bson.RawValue{Type: t, Value: b}})
		}
		_, b, err := bson.MarshalValue(arr)
		return bson.TypeArray, b, err
	case traits.Mapper:
		// A map has no order; its fields are written sorted, so that the
		// same change always gives the same bytes.
		var keys []string
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return 0, nil, fmt.Errorf("a map with a %s key is not a BSON document", k.Type().TypeName())
			}
			keys = append(keys, string(ks))
		}
		slices.Sort(keys)
		doc := make(bson.D, 0, len(keys))
		for _, k := range keys {
			t, b, err := bsonValue(v.Get(types.String(k)))
			if err != nil {
				return 0, nil, err
			}
			doc = append(doc, bson.E{Key: k, Value: bson.RawValue{Type: t, Value: b}})
		}
		return bson.MarshalValue(doc)
	}
	return 0, nil, fmt.Errorf("a CEL %s has no BSON form", v.Type().TypeName())
}
