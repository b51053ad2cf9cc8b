package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $unwind.

type unwindStage struct {
	path     []string
	index    string
	preserve bool
}

func compileUnwind(v bson.RawValue) (stage, error) {
	s := &unwindStage{}
	var path string
	switch v.Type {
	case bson.TypeString:
		path = str(v)
	case bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		for {
			k, f, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "path":
				if f.Type != bson.TypeString {
					return nil, mongoerr.New(28808, "expected a string as the path for $unwind stage, got %s", typeName(f.Type))
				}
				path = str(f)
			case "includeArrayIndex":
				if f.Type != bson.TypeString || str(f) == "" {
					return nil, mongoerr.New(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")
				}
				s.index = str(f)
				if strings.HasPrefix(s.index, "$") {
					return nil, mongoerr.New(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", s.index)
				}
				if err := checkPathParts(strings.Split(s.index, ".")); err != nil {
					return nil, err
				}
			case "preserveNullAndEmptyArrays":
				if f.Type != bson.TypeBoolean {
					return nil, mongoerr.New(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", typeName(f.Type))
				}
				s.preserve = f.Boolean()
			default:
				return nil, mongoerr.New(28811, "unrecognized option to $unwind stage: %s", k)
			}
		}
		if path == "" {
			return nil, mongoerr.New(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, mongoerr.New(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeName(v.Type))
	}
	if !strings.HasPrefix(path, "$") {
		return nil, mongoerr.New(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	s.path = strings.Split(path[1:], ".")
	if err := checkPathParts(s.path); err != nil {
		return nil, err
	}
	return s, nil
}

// docPath follows path through embedded documents only.
func docPath(doc bson.Raw, path []string) bson.RawValue {
	v := vDoc(doc)
	for _, c := range path {
		if v.Type != bson.TypeEmbeddedDocument {
			return missing
		}
		v = lookup(v.Value, c)
	}
	return v
}

func (s *unwindStage) each(_ *runCtx, d bson.Raw, out func(bson.Raw) error) error {
	emit := func(d bson.Raw, v bson.RawValue, idx bson.RawValue, replace bool) error {
		if !replace && s.index == "" {
			return out(d)
		}
		root := rawNode(vDoc(d))
		root.load()
		if replace {
			setField(root, s.path, v)
		}
		if s.index != "" {
			setField(root, strings.Split(s.index, "."), idx)
		}
		return out(root.encodeDoc(nil))
	}
	v := docPath(d, s.path)
	switch v.Type {
	case bson.TypeArray:
		it := iterDoc(v.Value)
		i := int64(0)
		for {
			_, e, ok := it.next()
			if !ok {
				break
			}
			if err := emit(d, e, vInt64(i), true); err != nil {
				return err
			}
			i++
		}
		if i == 0 && s.preserve {
			return emit(d, missing, nullValue, true)
		}
		return nil
	case 0, bson.TypeNull, bson.TypeUndefined:
		if s.preserve {
			return emit(d, v, nullValue, false)
		}
		return nil
	default:
		return emit(d, v, nullValue, false)
	}
}
