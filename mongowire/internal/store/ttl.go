package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// TTL indexes, as mongod's TTL monitor: every TTLInterval (60 s by
// default, ttlMonitorSleepSecs) a pass deletes, for each index with
// expireAfterSeconds, the documents whose indexed field is a date (the
// earliest one, for an array) older than now minus expireAfterSeconds.
// Each delete is an ordinary delete: in the oplog, in change streams, with
// a pre-image when the collection records them.

// ttlBatch is how many documents one write of a pass deletes, so that a
// large expiry does not hold the write lock for long.
const ttlBatch = 1000

// ttlSeconds returns an index's expireAfterSeconds, if it has one.
func ttlSeconds(spec IndexSpec) (float64, bool) {
	for _, o := range spec.Options {
		if o.Key != "expireAfterSeconds" {
			continue
		}
		v, ok := rawOption(o.Value)
		if !ok || !isNumber(v.Type) {
			return 0, false
		}
		return v.AsFloat64(), true
	}
	return 0, false
}

func isNumber(t bson.Type) bool {
	return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble || t == bson.TypeDecimal128
}

// checkTTL refuses a bad expireAfterSeconds as mongod 7.0 does.
func checkTTL(spec IndexSpec) error {
	for _, o := range spec.Options {
		if o.Key != "expireAfterSeconds" {
			continue
		}
		v, _ := rawOption(o.Value)
		if !isNumber(v.Type) || v.Type == bson.TypeDecimal128 {
			return mongoerr.New(mongoerr.CannotCreateIndex, "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s'. Index spec: %v", typeNameOf(v.Type), indexDoc(spec))
		}
		f := v.AsFloat64()
		if math.IsNaN(f) || f < 0 || f > math.MaxInt32 {
			return mongoerr.New(mongoerr.CannotCreateIndex, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number. Index spec: %v", indexDoc(spec))
		}
		if spec.Name == "_id_" || (len(spec.Key) == 1 && spec.Key[0].Key == "_id") {
			return mongoerr.New(197, "The field 'expireAfterSeconds' is not valid for an _id index specification. Specification: %v", indexDoc(spec))
		}
		if len(spec.Key) != 1 {
			return mongoerr.New(mongoerr.CannotCreateIndex, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %v", indexDoc(spec))
		}
	}
	return nil
}

func typeNameOf(t bson.Type) string {
	if t == 0 {
		return "missing"
	}
	return typeAlias(t)
}

// ttlTarget is one TTL index of a pass.
type ttlTarget struct {
	ns     Namespace
	uuid   bson.Binary
	index  string
	filter bson.Raw // {path: {$lt: cutoff}, $and: [partialFilterExpression]?}
}

// ExpireTTL runs one pass of the TTL monitor as of now and returns how
// many documents it deleted.
func (s *Store) ExpireTTL(now time.Time) (int, error) {
	var targets []ttlTarget
	err := s.read(func() error {
		for db, colls := range s.dbs {
			for name, c := range colls {
				if secs, ok := timeseriesTTL(c); ok { // measurements expire by their time
					f := bson.D{{Key: c.ts.timeField, Value: bson.D{{Key: "$lt", Value: bson.NewDateTimeFromTime(now.Add(-time.Duration(secs * float64(time.Second))))}}}}
					raw, err := bson.Marshal(f)
					if err != nil {
						return err
					}
					targets = append(targets, ttlTarget{ns: Namespace{DB: db, Coll: name}, uuid: c.info.UUID, index: "_id_", filter: raw})
				}
				if secs, ok := clusteredTTL(c); ok {
					f := bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: bson.NewDateTimeFromTime(now.Add(-time.Duration(secs * float64(time.Second))))}}}}
					raw, err := bson.Marshal(f)
					if err != nil {
						return err
					}
					targets = append(targets, ttlTarget{ns: Namespace{DB: db, Coll: name}, uuid: c.info.UUID, index: "_id_", filter: raw})
				}
				for _, ix := range c.indexes {
					secs, ok := ttlSeconds(ix.spec)
					if !ok || len(ix.spec.Key) != 1 {
						continue
					}
					cutoff := now.Add(-time.Duration(secs * float64(time.Second)))
					f := bson.D{{Key: ix.spec.Key[0].Key, Value: bson.D{{Key: "$lt", Value: bson.NewDateTimeFromTime(cutoff)}}}}
					for _, o := range ix.spec.Options {
						if o.Key == "partialFilterExpression" {
							f = append(f, bson.E{Key: "$and", Value: bson.A{o.Value}})
						}
					}
					raw, err := bson.Marshal(f)
					if err != nil {
						return err
					}
					targets = append(targets, ttlTarget{ns: Namespace{DB: db, Coll: name}, uuid: c.info.UUID, index: ix.spec.Name, filter: raw})
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(targets, func(a, b ttlTarget) int {
		if a.ns.String() != b.ns.String() {
			if a.ns.String() < b.ns.String() {
				return -1
			}
			return 1
		}
		if a.index < b.index {
			return -1
		}
		return 1
	})
	total := 0
	for _, tg := range targets {
		n, err := s.expireIndex(tg)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// expireIndex deletes the expired documents of one TTL index, in batches.
func (s *Store) expireIndex(tg ttlTarget) (int, error) {
	f, err := compileQuery(tg.filter, nil)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n := 0
		err := s.write(func(t *tx) error {
			c := s.collLocked(tg.ns)
			if c == nil || !bytes.Equal(c.info.UUID.Data, tg.uuid.Data) {
				return nil // dropped (or replaced) since the pass began
			}
			if c.index(tg.index) == nil {
				return nil
			}
			for _, h := range hits(c, f, ttlBatch) {
				if err := s.deleteAt(t, tg.ns, c, c.pos(h.rid)); err != nil {
					return err // a transaction's document: wait for it, then again
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || n < ttlBatch {
			return total, err
		}
	}
}

// ttlInterval is the configured pass interval, 0 if disabled.
func (s *Store) ttlInterval() time.Duration {
	switch iv := s.cfg.TTLInterval; {
	case iv < 0:
		return 0
	case iv == 0:
		return 60 * time.Second
	default:
		return iv
	}
}

// ttlPass runs a pass from the background goroutine, logging a failure.
func (s *Store) ttlPass(now time.Time) {
	n, err := s.ExpireTTL(now)
	if err != nil && !errors.Is(err, errClosed) {
		s.log.Warn("TTL monitor pass failed", "err", err, "deleted", n)
		return
	}
	if n > 0 {
		s.log.Debug("TTL monitor pass", "deleted", n)
	}
}

// IndexRef names an index for collMod: by name or by key pattern.
type IndexRef struct {
	Name       string
	KeyPattern bson.D
}

// CollModTTL sets expireAfterSeconds of an index, as collMod {index:
// {name | keyPattern, expireAfterSeconds}} does, and returns the old value
// (had reports whether there was one). The change is recorded as a modify
// entry {index: {name, expireAfterSeconds}}.
func (s *Store) CollModTTL(ns Namespace, ref IndexRef, secs int64) (old float64, had bool, err error) {
	if secs < 0 || secs > math.MaxInt32 {
		return 0, false, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
	}
	err = s.write(func(t *tx) error {
		c := s.collLocked(ns)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
		}
		if err := refuseViewLocked(ns, c); err != nil {
			return err
		}
		var ix *index
		for _, x := range c.indexes {
			if (ref.Name != "" && x.spec.Name == ref.Name) || (ref.Name == "" && sameKey(x.spec.Key, ref.KeyPattern)) {
				ix = x
				break
			}
		}
		if ix == nil {
			return mongoerr.New(mongoerr.IndexNotFound, "cannot find index %v for ns %s", refString(ref), ns)
		}
		spec := ix.spec
		spec.Options = append(bson.D{}, spec.Options...)
		old, had = ttlSeconds(spec)
		i := slices.IndexFunc(spec.Options, func(e bson.E) bool { return e.Key == "expireAfterSeconds" })
		if i >= 0 {
			spec.Options[i].Value = secs
		} else {
			spec.Options = append(spec.Options, bson.E{Key: "expireAfterSeconds", Value: secs})
		}
		if err := checkTTL(spec); err != nil {
			return err
		}
		ix.spec = spec
		t.emit(OplogEntry{Op: "modify", NS: ns, UUID: c.info.UUID, Extra: bson.D{
			{Key: "index", Value: bson.D{{Key: "name", Value: spec.Name}, {Key: "expireAfterSeconds", Value: secs}}},
		}})
		return nil
	})
	return old, had, err
}

func refString(ref IndexRef) string {
	if ref.Name != "" {
		return ref.Name
	}
	return fmt.Sprint(ref.KeyPattern)
}

// applyIndexModLocked redoes a journaled {index: {name, expireAfterSeconds}}.
func applyIndexModLocked(c *collection, v any) {
	rv, _ := rawOption(v)
	d, ok := rv.DocumentOK()
	if !ok {
		return
	}
	ix := c.index(d.Lookup("name").StringValue())
	if ix == nil {
		return
	}
	applyIndexChangeLocked(ix, d)
	secs, err := d.LookupErr("expireAfterSeconds")
	if err != nil {
		return
	}
	spec := ix.spec
	spec.Options = append(bson.D{}, spec.Options...)
	if i := slices.IndexFunc(spec.Options, func(e bson.E) bool { return e.Key == "expireAfterSeconds" }); i >= 0 {
		spec.Options[i].Value = secs
	} else {
		spec.Options = append(spec.Options, bson.E{Key: "expireAfterSeconds", Value: secs})
	}
	ix.spec = spec
}
