package store

import (
	"bytes"
	"math"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Capped collections: {capped: true, size, max}. After an insert, the
// oldest documents (natural order) go until the collection fits in size
// bytes and max documents. As mongod's since 5.0, each such delete is an
// explicit delete in the oplog (so in change streams and the journal).

// maxCappedSize is mongod's limit on size (1 PB).
const maxCappedSize = int64(1) << 50

// cappedLimits reads capped, size and max from a collection's options.
func cappedLimits(options bson.D) (capped bool, size, max int64) {
	for _, o := range options {
		v, _ := rawOption(o.Value)
		switch o.Key {
		case "capped":
			capped = truthy(v)
		case "size":
			if isNumber(v.Type) {
				size = int64(v.AsFloat64())
			}
		case "max":
			if isNumber(v.Type) {
				max = int64(v.AsFloat64())
			}
		}
	}
	return capped, size, max
}

// checkCapped checks the capped options of a create.
func checkCapped(options bson.D) error {
	capped, _, _ := cappedLimits(options)
	hasSize := false
	for _, o := range options {
		v, _ := rawOption(o.Value)
		switch o.Key {
		case "size", "max":
			if !isNumber(v.Type) {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", o.Key, typeNameOf(v.Type))
			}
			if o.Key == "size" {
				hasSize = true
				if f := v.AsFloat64(); f < 0 || f > float64(maxCappedSize) || math.IsNaN(f) {
					return mongoerr.New(mongoerr.BadValue, "BSON field 'size' value must be in the range [0, 1125899906842624]")
				}
			}
		}
	}
	if capped && !hasSize {
		return mongoerr.New(mongoerr.InvalidOptions, "the 'size' field is required when 'capped' is true")
	}
	return nil
}

// capLocked deletes the oldest documents of a capped collection until it
// fits its limits; the newest document always stays. c.capHead remembers
// where the oldest live document may be, so that capping does not rescan
// the holes of earlier deletes.
func (s *Store) capLocked(t *tx, ns Namespace, c *collection) error {
	if !c.capped {
		return nil
	}
	for c.live > 1 && ((c.capSize > 0 && c.size > c.capSize) || (c.capMax > 0 && int64(c.live) > c.capMax)) {
		p := c.capHead
		if p > len(c.recs) || (p > 0 && c.recs[p-1].doc != nil) {
			p = 0 // compacted since
		}
		for p < len(c.recs) && c.recs[p].doc == nil {
			p++
		}
		n := len(c.recs)
		if err := s.deleteAt(t, ns, c, p); err != nil {
			return err
		}
		c.capHead = p + 1
		if len(c.recs) != n {
			c.capHead = 0
		}
	}
	return nil
}

// setCappedLocked applies a collection's capped options.
func setCappedLocked(c *collection, options bson.D) {
	c.capped, c.capSize, c.capMax = cappedLimits(options)
	if !c.capped {
		c.capSize, c.capMax = 0, 0
	}
}

// IsCapped reports whether ns is a capped collection, and whether it exists.
func (s *Store) IsCapped(ns Namespace) (capped, exists bool) {
	_ = s.read(func() error {
		c := s.collLocked(ns)
		exists = c != nil
		capped = c != nil && c.capped
		return nil
	})
	return capped, exists
}

// TailPosition is where a tailable cursor stands in a collection.
type TailPosition struct {
	UUID bson.Binary
	RID  uint64 // the last record returned; 0 before the first
}

// ReadTail returns up to max documents of ns after pos that match f, in
// natural order, within maxBytes (at least one), and the new position. A collection dropped or replaced
// since the cursor opened fails with QueryPlanKilled (175), as mongod
// kills the cursor; a position overwritten by capped deletes fails with
// CappedPositionLost (136).
func (s *Store) ReadTail(ns Namespace, pos TailPosition, f *mql.Filter, max, maxBytes int) ([]bson.Raw, TailPosition, error) {
	var out []bson.Raw
	err := s.read(func() error {
		c := s.collLocked(ns)
		if c == nil || (len(pos.UUID.Data) > 0 && !bytes.Equal(pos.UUID.Data, c.info.UUID.Data)) {
			return mongoerr.New(175, "collection dropped. UUID %v", pos.UUID)
		}
		pos.UUID = c.info.UUID
		i := sort.Search(len(c.recs), func(j int) bool { return c.recs[j].rid > pos.RID })
		if pos.RID > 0 && (i == 0 || c.recs[i-1].rid != pos.RID || c.recs[i-1].doc == nil) && c.capped {
			// Our last document is gone: overwritten, unless it was deleted
			// by hand and later ones remain (mongod tells these apart
			// no better).
			if i == 0 || c.firstLive() > pos.RID {
				return mongoerr.New(136, "CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId(%d)", pos.RID)
			}
		}
		size := 0
		for ; i < len(c.recs) && len(out) < max; i++ {
			r := c.recs[i]
			if r.doc != nil && f.Match(r.doc) {
				if len(out) > 0 && size+len(r.doc) > maxBytes {
					break
				}
				out = append(out, r.doc)
				size += len(r.doc)
			}
			pos.RID = r.rid
		}
		return nil
	})
	return out, pos, err
}

// firstLive returns the record id of the oldest live document, or
// math.MaxUint64 if none.
func (c *collection) firstLive() uint64 {
	for _, r := range c.recs {
		if r.doc != nil {
			return r.rid
		}
	}
	return math.MaxUint64
}

// refuseCapped refuses a transaction's write to a capped collection, as
// mongod does: capping deletes documents other writers may be reading.
func (t *tx) refuseCapped(ns Namespace, c *collection) error {
	if t.txn == nil || !c.capped {
		return nil
	}
	return mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
		"Collection '%s' is a capped collection. Writes in transactions are not allowed on capped collections.", ns)
}
