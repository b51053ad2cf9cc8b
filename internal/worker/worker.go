package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tide-cdc/tide/pipeline"
)

// Runner is a built pipeline, as tide.New returns it.
type Runner interface {
	Run(ctx context.Context) error
	Drain(ctx context.Context) error
	State() pipeline.State
	Stats() pipeline.Stats
	Close() error // releases what building took, for a Runner never run
}

// Lease is a worker's hold on one pipeline.
type Lease struct {
	Pipeline string
	Worker   string
	Revision uint64 // the revision of the lease's key when it was acquired
}

// Owner names the holder of l in checkpoint fences: the worker and the
// revision at which it acquired the lease, unique in the group's history.
func (l Lease) Owner() string { return fmt.Sprintf("%s@%d", l.Worker, l.Revision) }

// Definition is a pipeline file as a worker found it.
type Definition struct {
	Name   string // the pipeline's name, from the file
	Text   []byte
	Origin string // the file's path, or "kv:NAME" for one stored in tide_pipelines
}

// Config configures a Worker.
type Config struct {
	// ID names the worker in its group; two live workers must not share
	// one.
	ID   string
	Host string
	// LeaseTTL is how long a lease and a heartbeat outlive their last
	// renewal; renewals come every LeaseTTL/3. Default 10 s.
	LeaseTTL time.Duration
	// DrainTimeout bounds the drain of a pipeline that moves to another
	// worker; past it, the pipeline is stopped hard. Default 30 s.
	DrainTimeout time.Duration
	// Dir, if set, holds pipeline files (*.yaml, *.yml) that every
	// worker of the group reads; tide_pipelines holds more.
	Dir     string
	Buckets *Buckets
	// Parse validates a pipeline file and returns its name. A file that
	// does not validate is skipped, with its error logged.
	Parse func(origin string, text []byte) (string, error)
	// Build builds the pipeline def for lease. It must fence the
	// pipeline's checkpoint for lease.Owner() before the sink can open,
	// so that a former owner's next checkpoint save fails.
	Build func(ctx context.Context, def Definition, lease Lease, reg prometheus.Registerer) (Runner, error)
	// Lag, if set, reports how far a running pipeline is behind its
	// source, for its status.
	Lag    func(Runner) string
	Logger *slog.Logger
}

// Worker runs its share of a group's pipelines.
type Worker struct {
	cfg   Config
	log   *slog.Logger
	since time.Time

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain
	done      chan struct{} // closed when Run returns

	slotsDone chan *slot // a slot's goroutine has finished
	wg        sync.WaitGroup

	leaseChanges *prometheus.CounterVec

	mu    sync.Mutex       // guards the fields below
	slots map[string]*slot // the pipelines this worker holds a lease on
	live  int              // live workers, as last seen
}

// New returns a worker; Run starts it.
func New(cfg Config) *Worker {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{
		cfg:       cfg,
		log:       cfg.Logger.With("worker", cfg.ID),
		draining:  make(chan struct{}),
		done:      make(chan struct{}),
		slotsDone: make(chan *slot),
		slots:     map[string]*slot{},
		leaseChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tide", Subsystem: "worker", Name: "lease_changes_total",
			Help: "Leases acquired, released (after a drain) and lost (a renewal failed).",
		}, []string{"change"}),
	}
}

// Drain hands every pipeline over: the worker leaves the group at once (its
// heartbeat is deleted, so the others reassign), drains its pipelines,
// releases their leases, and Run returns nil. Drain waits for that, or
// for ctx.
func (w *Worker) Drain(ctx context.Context) error {
	w.drainOnce.Do(func() { close(w.draining) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldLease is a lease as the watch last showed it.
type heldLease struct {
	record LeaseRecord
	rev    uint64
	seen   time.Time // when the watch delivered it, on this worker's clock
}

// world is what the main loop knows of the group, from the watches.
type world struct {
	workers   map[string]time.Time  // live worker -> when its heartbeat was last seen
	leases    map[string]heldLease  // pipeline -> holder
	stored    map[string]Definition // from tide_pipelines, by key
	files     map[string]Definition // from Dir, by pipeline name
	bad       map[string]string     // origin -> the error last logged for it
	ready     int                   // watches that delivered their initial values
	pipelines map[string]Definition // files and stored, merged
}

// Run joins the group and runs the pipelines the assignment gives this
// worker until ctx is done (a hard stop: pipelines are cancelled and their
// leases left to expire) or a Drain completes (leases released, nil).
func (w *Worker) Run(ctx context.Context) error {
	defer close(w.done)
	w.since = time.Now().UTC()
	b := w.cfg.Buckets
	ttl := w.cfg.LeaseTTL

	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		w.waitSlots()
	}()

	if err := w.heartbeat(ctx); err != nil {
		return err
	}
	wWatch, err := b.Workers.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", WorkersBucket, err)
	}
	defer wWatch.Stop()
	lWatch, err := b.Leases.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", LeasesBucket, err)
	}
	defer lWatch.Stop()
	pWatch, err := b.Pipelines.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", PipelinesBucket, err)
	}
	defer pWatch.Stop()

	wd := &world{
		workers: map[string]time.Time{}, leases: map[string]heldLease{},
		stored: map[string]Definition{}, files: map[string]Definition{}, bad: map[string]string{},
	}
	w.scanDir(wd)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	draining := w.draining
	for {
		select {
		case e := <-wWatch.Updates():
			if e == nil {
				wd.ready++
			} else if e.Operation() == jetstream.KeyValuePut {
				wd.workers[e.Key()] = time.Now()
			} else {
				delete(wd.workers, e.Key())
			}
		case e := <-lWatch.Updates():
			if e == nil {
				wd.ready++
			} else if e.Operation() == jetstream.KeyValuePut {
				var rec LeaseRecord
				_ = json.Unmarshal(e.Value(), &rec) // an unreadable record still holds the lease
				wd.leases[e.Key()] = heldLease{record: rec, rev: e.Revision(), seen: time.Now()}
			} else {
				delete(wd.leases, e.Key())
			}
		case e := <-pWatch.Updates():
			if e == nil {
				wd.ready++
			} else if e.Operation() == jetstream.KeyValuePut {
				w.storeDefinition(wd, e.Key(), e.Value())
			} else {
				delete(wd.stored, e.Key())
			}
		case s := <-w.slotsDone:
			w.mu.Lock()
			delete(w.slots, s.lease.Pipeline)
			w.mu.Unlock()
		case <-tick.C:
			if draining != nil { // not while leaving the group
				if err := w.heartbeat(ctx); err != nil {
					w.log.Warn("heartbeat failed", "err", err)
				}
			}
			for id, seen := range wd.workers {
				if time.Since(seen) > ttl { // its expiry marker was missed
					delete(wd.workers, id)
				}
			}
			w.scanDir(wd)
		case <-draining:
			draining = nil
			w.leave()
		case <-ctx.Done():
			return nil
		}
		if draining == nil {
			if w.held() == 0 {
				return nil
			}
			continue
		}
		if wd.ready >= 3 {
			w.reconcile(ctx, wd)
		}
	}
}

// leave deletes the heartbeat, so that the other workers reassign this
// one's pipelines at once, and asks every slot to drain and release.
func (w *Worker) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.LeaseTTL/3)
	defer cancel()
	if err := w.cfg.Buckets.Workers.Delete(ctx, w.cfg.ID); err != nil {
		w.log.Warn("leave the group", "err", err)
	}
	w.log.Info("draining: handing every pipeline over", "pipelines", w.held())
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.slots {
		s.release()
	}
}

func (w *Worker) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.slots)
}

// waitSlots waits for every slot goroutine, taking their done signals.
func (w *Worker) waitSlots() {
	finished := make(chan struct{})
	go func() { w.wg.Wait(); close(finished) }()
	for {
		select {
		case s := <-w.slotsDone:
			w.mu.Lock()
			delete(w.slots, s.lease.Pipeline)
			w.mu.Unlock()
		case <-finished:
			return
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context) error {
	rec := WorkerRecord{ID: w.cfg.ID, Host: w.cfg.Host, Since: w.since, Pipelines: w.owned(), Updated: time.Now().UTC()}
	v, _ := json.Marshal(rec)
	ctx, cancel := context.WithTimeout(ctx, w.cfg.LeaseTTL/3)
	defer cancel()
	if _, err := w.cfg.Buckets.Workers.Put(ctx, w.cfg.ID, v); err != nil {
		return fmt.Errorf("heartbeat in %s: %w", WorkersBucket, err)
	}
	return nil
}

func (w *Worker) owned() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.slots))
	for n := range w.slots {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// reconcile acquires the free pipelines the assignment gives this worker
// and releases, after a drain, those it gives another.
func (w *Worker) reconcile(ctx context.Context, wd *world) {
	defs := w.merge(wd)
	ids := make([]string, 0, len(wd.workers))
	for id := range wd.workers {
		ids = append(ids, id)
	}
	w.mu.Lock()
	w.live = len(ids)
	w.mu.Unlock()
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	plan := Assign(names, ids)

	w.mu.Lock()
	for name, s := range w.slots {
		def, ok := defs[name]
		if plan[name] != w.cfg.ID || !ok || !bytes.Equal(def.Text, s.def.Text) {
			s.release() // drained, then released; the next owner's watch sees it
		}
	}
	w.mu.Unlock()

	for _, name := range names {
		if plan[name] != w.cfg.ID {
			continue
		}
		w.mu.Lock()
		_, running := w.slots[name]
		w.mu.Unlock()
		if running {
			continue
		}
		h, held := wd.leases[name]
		switch {
		case !held:
			w.acquire(ctx, defs[name], wd, 0)
		case h.rev != 0 && time.Since(h.seen) > w.cfg.LeaseTTL:
			// Every renewal is a put that the watch shows, so a lease
			// unchanged for a whole TTL is one its owner stopped
			// renewing (and that owner stops its pipeline after two
			// thirds of the TTL without a renewal). Take it over by
			// compare-and-set on the revision we saw, without waiting
			// for the bucket's expiry; the checkpoint fence covers a
			// clock that runs slow.
			w.acquire(ctx, defs[name], wd, h.rev)
		}
		// Otherwise it is held, by a live owner or one still draining;
		// its deletion, or its silence, brings us back here.
	}
}

// acquire takes the lease of def: create-if-absent when expired is 0,
// else compare-and-set over the expired lease at that revision.
func (w *Worker) acquire(ctx context.Context, def Definition, wd *world, expired uint64) {
	rec := LeaseRecord{Worker: w.cfg.ID, Host: w.cfg.Host, Acquired: time.Now().UTC()}
	v, _ := json.Marshal(rec)
	cctx, cancel := context.WithTimeout(ctx, w.cfg.LeaseTTL/3)
	defer cancel()
	var rev uint64
	var err error
	if expired == 0 {
		rev, err = w.cfg.Buckets.Leases.Create(cctx, def.Name, v)
	} else {
		rev, err = w.cfg.Buckets.Leases.Update(cctx, def.Name, v, expired)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) { // another took it first
		if _, seen := wd.leases[def.Name]; !seen {
			// Someone holds it that the watch has not shown yet.
			wd.leases[def.Name] = heldLease{seen: time.Now()}
		}
		return
	}
	if err != nil {
		w.log.Warn("acquire lease", "pipeline", def.Name, "err", err)
		return
	}
	w.leaseChanges.WithLabelValues("acquired").Inc()
	if expired == 0 {
		w.log.Info("lease acquired", "pipeline", def.Name, "revision", rev)
	} else {
		w.log.Info("lease acquired", "pipeline", def.Name, "revision", rev, "expired_revision", expired, "expired_owner", wd.leases[def.Name].record.Worker)
	}
	wd.leases[def.Name] = heldLease{record: rec, rev: rev, seen: time.Now()}
	s := &slot{
		w:       w,
		def:     def,
		lease:   Lease{Pipeline: def.Name, Worker: w.cfg.ID, Revision: rev},
		record:  v,
		rev:     rev,
		stop:    make(chan struct{}),
		reg:     prometheus.NewRegistry(),
		state:   "starting",
		started: time.Now(),
	}
	w.mu.Lock()
	w.slots[def.Name] = s
	w.mu.Unlock()
	w.wg.Add(1)
	go func() { // owned by the worker: Run waits for it in waitSlots
		defer w.wg.Done()
		s.run(ctx)
		w.slotsDone <- s
	}()
}

// merge returns the group's pipelines: the directory's files, then those
// stored in tide_pipelines; a name in both runs the file's.
func (w *Worker) merge(wd *world) map[string]Definition {
	out := make(map[string]Definition, len(wd.files)+len(wd.stored))
	for _, d := range wd.stored {
		out[d.Name] = d
	}
	for n, d := range wd.files {
		if s, ok := out[n]; ok && !bytes.Equal(s.Text, d.Text) {
			w.logBad(wd, s.Origin, fmt.Errorf("pipeline %q is also in %s, which wins", n, d.Origin))
		}
		out[n] = d
	}
	return out
}

func (w *Worker) storeDefinition(wd *world, key string, text []byte) {
	origin := "kv:" + key
	name, err := w.cfg.Parse(origin, text)
	if err == nil && name != key {
		err = fmt.Errorf("pipeline is named %q, stored as %q", name, key)
	}
	if err != nil {
		delete(wd.stored, key)
		w.logBad(wd, origin, err)
		return
	}
	delete(wd.bad, origin)
	wd.stored[key] = Definition{Name: name, Text: bytes.Clone(text), Origin: origin}
}

// scanDir reads the pipeline files of Dir. A file that does not validate
// is skipped, with its error logged once until it changes.
func (w *Worker) scanDir(wd *world) {
	if w.cfg.Dir == "" {
		return
	}
	entries, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		w.logBad(wd, w.cfg.Dir, fmt.Errorf("read pipelines: %w", err))
		return
	}
	delete(wd.bad, w.cfg.Dir)
	files := map[string]Definition{}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(w.cfg.Dir, e.Name())
		text, err := os.ReadFile(path)
		if err == nil {
			var name string
			if name, err = w.cfg.Parse(path, text); err == nil {
				if d, dup := files[name]; dup {
					err = fmt.Errorf("pipeline %q is also in %s", name, d.Origin)
				} else if !ValidKey(name) {
					err = fmt.Errorf("name %q: a pipeline run by workers needs a name of letters, digits, '-', '_', '=' and inner '.'", name)
				}
			}
			if err == nil {
				delete(wd.bad, path)
				files[name] = Definition{Name: name, Text: text, Origin: path}
				continue
			}
		}
		w.logBad(wd, path, err)
	}
	wd.files = files
}

func (w *Worker) logBad(wd *world, origin string, err error) {
	msg := err.Error()
	if wd.bad[origin] == msg {
		return
	}
	wd.bad[origin] = msg
	w.log.Error("pipeline skipped", "origin", origin, "err", err)
}

// Describe and Collect make the worker a prometheus.Collector of the
// pipelines it holds and of its lease changes.
func (w *Worker) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(w, ch)
}

var (
	ownedDesc = prometheus.NewDesc("tide_worker_pipeline_owned", "1 for each pipeline this worker holds the lease of, by state.", []string{"pipeline", "state"}, nil)
	liveDesc  = prometheus.NewDesc("tide_worker_live_workers", "Live workers of the group, as this worker sees them.", nil, nil)
)

func (w *Worker) Collect(ch chan<- prometheus.Metric) {
	w.leaseChanges.Collect(ch)
	w.mu.Lock()
	defer w.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, float64(w.live))
	for name, s := range w.slots {
		ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, 1, name, s.getState())
	}
}

// Gatherer returns base's metrics with those of the pipelines this worker
// runs, each kept in a registry of its own so that a pipeline that comes
// back registers afresh.
func (w *Worker) Gatherer(base prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		w.mu.Lock()
		gs := prometheus.Gatherers{base}
		for _, s := range w.slots {
			gs = append(gs, s.reg)
		}
		w.mu.Unlock()
		return gs.Gather()
	})
}
