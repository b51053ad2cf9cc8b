package mongo

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/retry"
)

// signalNS is the namespace of the signal collection, "" when off.
func (s *Source) signalNS() string {
	c := s.cfg.SignalCollection
	if c == "" {
		return ""
	}
	if strings.Contains(c, ".") {
		return c
	}
	return s.cfg.Database + "." + c
}

// openSignals opens the change stream of the inserts into the signal
// collection: after tok, or at from, or from now.
func (s *Source) openSignals(ctx context.Context, tok bson.Raw, from *bson.Timestamp) (*mongo.ChangeStream, error) {
	db, name, _ := strings.Cut(s.signalNS(), ".")
	o := options.ChangeStream().SetMaxAwaitTime(s.cfg.MaxAwait)
	switch {
	case tok != nil:
		o.SetResumeAfter(tok)
	case from != nil:
		o.SetStartAtOperationTime(from)
	}
	match := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}
	cs, err := s.client.Database(db).Collection(name).Watch(ctx, match, o)
	if err != nil && tok == nil && from != nil && isCode(err, codeChangeStreamHistory) {
		s.log.Warn("signal collection: the signals written while the pipeline was stopped are no longer in the oplog; watching from now", "collection", s.signalNS())
		return s.openSignals(ctx, nil, nil)
	}
	return cs, err
}

// watchSignals follows the inserts into the signal collection, from the
// cluster time the source resumed at (so that a signal written while the
// pipeline was stopped counts), until ctx is done. cs is the stream Open
// opened, or nil if it failed. A signal already taken (its _id names a
// snapshot the checkpoint keeps) is not taken again.
func (s *Source) watchSignals(ctx context.Context, cs *mongo.ChangeStream, from *bson.Timestamp) {
	ns := s.signalNS()
	var tok bson.Raw
	failures := 0
	for ctx.Err() == nil {
		var err error
		if cs == nil {
			cs, err = s.openSignals(ctx, tok, from)
		}
		if err == nil {
			for cs.Next(ctx) {
				failures = 0
				s.signal(ctx, ns, cs.Current.Lookup("fullDocument"))
				tok = slices.Clone(cs.ResumeToken())
			}
			if t := cs.ResumeToken(); len(t) > 0 {
				tok = slices.Clone(t)
			}
			err = cs.Err()
			cs.Close(context.WithoutCancel(ctx))
			cs = nil
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		d := backoff(failures, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Warn("signal collection: change stream failed; reopening", "collection", ns, "in", d, "err", err)
		if retry.Sleep(ctx, d) != nil {
			return
		}
	}
	if cs != nil {
		cs.Close(context.WithoutCancel(ctx))
	}
}

// signal takes one signal document.
func (s *Source) signal(ctx context.Context, ns string, v bson.RawValue) {
	doc, ok := v.DocumentOK()
	if !ok {
		return
	}
	idj, err := idJSON(doc.Lookup("_id"))
	if err != nil {
		return
	}
	log := s.log.With("signal", string(idj), "collection", ns)
	if typ, _ := doc.Lookup("type").StringValueOK(); typ != "snapshot" {
		log.Warn("signal ignored: its type is not \"snapshot\"", "type", doc.Lookup("type").String())
		return
	}
	if s.isnap.hasSignal(string(idj)) {
		return // taken before a restart
	}
	var req cdc.SnapshotRequest
	if arr, ok := doc.Lookup("collections").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, c := range vals {
			name, ok := c.StringValueOK()
			if !ok {
				log.Warn("signal refused: collections must be an array of names")
				return
			}
			if !strings.Contains(name, ".") && s.cfg.Database != "" {
				name = s.cfg.Database + "." + name
			}
			req.Collections = append(req.Collections, name)
		}
	}
	if f, ok := doc.Lookup("filter").DocumentOK(); ok {
		j, err := bson.MarshalExtJSON(f, true, false)
		if err != nil {
			log.Warn("signal refused: its filter cannot be read", "err", err)
			return
		}
		req.Filter = j
	} else if t := doc.Lookup("filter").Type; t != 0 && t != bson.TypeNull {
		log.Warn("signal refused: filter must be a document", "filter_type", t.String())
		return
	}
	if c, ok := doc.Lookup("chunk").AsInt64OK(); ok {
		req.Chunk = int(c)
	}
	r, filter, err := checkRequest(s.cfg, req)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = checkOnServer(cctx, s.client, r, filter)
		cancel()
	}
	if err == nil {
		r.Signal = string(idj)
		var id string
		if id, err = s.enqueue(r, filter); err == nil {
			log.Info("incremental snapshot requested by a signal", "snapshot", id)
			return
		}
	}
	log.Warn("signal refused", "err", err)
}

// hasSignal reports whether a snapshot the source knows was asked for by
// the signal whose _id is idj.
func (m *isnapState) hasSignal(idj string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs {
		if r.req.Signal == idj {
			return true
		}
	}
	for _, f := range m.finished {
		if f.Signal == idj {
			return true
		}
	}
	return false
}
