package mongo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
)

// Defaults of the oplog window watch.
const (
	DefaultOplogPoll    = 30 * time.Second
	DefaultHeadroomWarn = time.Hour
	// rateSpan is how far back the fill rate looks: long enough that one
	// burst of writes does not swing the estimate, short enough that it
	// follows a change of load within minutes.
	rateSpan = 10 * time.Minute
)

// oplogWatch reads the oplog window (the times of the first and last
// entries of local.oplog.rs) every OplogPoll, and derives how long the
// checkpoint stays inside it.
//
// The rate is how fast the window's start moves: seconds of cluster time
// dropped from the oplog per second of wall time, measured between the
// oldest sample of the last ten minutes and the newest. An oplog that
// drops nothing (not yet full, or retaining by time) has rate 0 and the
// headroom is unbounded. Otherwise the headroom is
//
//	(checkpoint time - first entry time) / rate
//
// the wall time until the first entry passes the checkpoint if the load
// stays as it was.
type oplogWatch struct {
	s *Source

	mu       sync.Mutex // guards the fields below
	known    bool       // a window was read; false also once refused
	first    cdc.Timestamp
	last     cdc.Timestamp
	samples  []oplogSample // oldest first, within rateSpan of the newest
	warning  bool
	headroom float64 // seconds; negative: unbounded
}

type oplogSample struct {
	at    time.Time
	first uint32 // seconds of the first entry's ts
}

// run polls until ctx is done. A server that refuses the read (no
// privilege on local, a mongos) is logged once, and the watch stops.
func (w *oplogWatch) run(ctx context.Context) {
	t := time.NewTicker(w.s.cfg.OplogPoll)
	defer t.Stop()
	transientLogged := false
	for {
		err := w.poll(ctx, time.Now())
		switch {
		case err == nil:
			transientLogged = false
		case ctx.Err() != nil:
			return
		case transient(err):
			if !transientLogged {
				w.s.log.Info("cannot read the oplog window now; retrying", "every", w.s.cfg.OplogPoll, "err", err)
				transientLogged = true
			}
		default:
			w.s.log.Warn("cannot read the oplog window (local.oplog.rs): oplog headroom is not measured; "+
				"grant the user read on the local database to measure it (a mongos has no oplog to read)", "err", err)
			w.mu.Lock()
			w.known = false
			w.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll reads the window once and updates the headroom.
func (w *oplogWatch) poll(ctx context.Context, now time.Time) error {
	first, last, ok, err := readOplogWindow(ctx, w.s.client, w.s.cfg.ConnectTimeout)
	if err != nil || !ok {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known, w.first, w.last = true, first, last
	w.samples = append(w.samples, oplogSample{at: now, first: first.T})
	for len(w.samples) > 2 && now.Sub(w.samples[1].at) >= rateSpan {
		w.samples = w.samples[1:]
	}
	w.headroom = -1
	old := w.samples[0]
	if cp := w.s.checkpointTime(); cp.T == 0 {
		w.headroom = -1 // no position yet
	} else if dt := now.Sub(old.at).Seconds(); dt > 0 && first.T > old.first {
		rate := float64(first.T-old.first) / dt
		w.headroom = max(0, float64(int64(cp.T)-int64(first.T))/rate)
	}
	warn := w.s.cfg.HeadroomWarn > 0 && w.headroom >= 0 && w.headroom < w.s.cfg.HeadroomWarn.Seconds()
	switch {
	case warn && !w.warning:
		w.s.log.Warn("checkpoint headroom is low: at the current oplog rate the checkpoint falls out of the oplog window soon; "+
			"speed up the sink or enlarge the oplog, or the pipeline will need a re-snapshot",
			"headroom", time.Duration(w.headroom*float64(time.Second)).Round(time.Second),
			"headroom_warn", w.s.cfg.HeadroomWarn,
			"oplog_window", time.Duration(last.T-first.T)*time.Second)
	case !warn && w.warning:
		w.s.log.Info("checkpoint headroom recovered", "headroom_warn", w.s.cfg.HeadroomWarn)
	}
	w.warning = warn
	return nil
}

// window returns what the last poll found; ok is false before the first
// successful read and after a refusal.
func (w *oplogWatch) window() (windowSec, headroom float64, warning, ok bool) {
	if w == nil {
		return 0, 0, false, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return float64(w.last.T) - float64(w.first.T), w.headroom, w.warning, w.known
}

// readOplogWindow returns the ts of the first and last entries of
// local.oplog.rs; ok is false for an empty oplog.
func readOplogWindow(ctx context.Context, c *mongo.Client, timeout time.Duration) (first, last cdc.Timestamp, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	coll := c.Database("local").Collection("oplog.rs")
	one := func(dir int) (cdc.Timestamp, bool, error) {
		var e struct {
			TS bson.Timestamp `bson:"ts"`
		}
		err := coll.FindOne(ctx, bson.D{}, options.FindOne().
			SetSort(bson.D{{Key: "$natural", Value: dir}}).
			SetProjection(bson.D{{Key: "ts", Value: 1}, {Key: "_id", Value: 0}})).Decode(&e)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return cdc.Timestamp{}, false, nil
		}
		if err != nil {
			return cdc.Timestamp{}, false, fmt.Errorf("read the oplog window: %w", err)
		}
		return cdc.Timestamp{T: e.TS.T, I: e.TS.I}, true, nil
	}
	if first, ok, err = one(1); err != nil || !ok {
		return first, last, ok, err
	}
	if last, ok, err = one(-1); err != nil || !ok {
		return first, last, ok, err
	}
	return first, last, true, nil
}

// checkpointTime is the cluster time of the last committed position, or
// before the first commit, of the position the source opened at.
func (s *Source) checkpointTime() cdc.Timestamp {
	t := s.metrics.committedT.Load()
	if t == 0 {
		t = s.metrics.openedT.Load()
	}
	return cdc.Timestamp{T: uint32(t >> 32), I: uint32(t)}
}

// StatusDetails returns the oplog headroom for a status page:
// oplog_window_seconds, checkpoint_headroom_seconds (nil while the oplog
// drops nothing: unbounded), headroom_warning and headroom_warn_seconds.
// It returns nil before the window was read, or when the server refused
// to let it be read.
func (s *Source) StatusDetails() map[string]any {
	win, headroom, warning, ok := s.oplog.window()
	if !ok {
		return s.isnapDetails(nil)
	}
	var h any
	if headroom >= 0 {
		h = headroom
	}
	return s.isnapDetails(map[string]any{
		"oplog_window_seconds":        win,
		"checkpoint_headroom_seconds": h,
		"headroom_warning":            warning,
		"headroom_warn_seconds":       max(0, s.cfg.HeadroomWarn.Seconds()),
	})
}
