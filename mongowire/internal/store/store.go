package store

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Store is the embedded server's storage engine: a catalog of databases and
// collections, their documents and indexes, the oplog and the cluster clock.
// It is safe for concurrent use.
type Store struct {
	cfg   Config
	fs    faultfs.FS
	log   *slog.Logger
	rsID  bson.ObjectID
	oplog *Oplog

	clockMu sync.Mutex // guards clock
	clock   bson.Timestamp

	mu     sync.RWMutex // guards the fields below
	dbs    map[string]map[string]*collection
	broken error    // a journal write failed: writes are refused from then on
	hist   history  // what snapshot reads undo (snapshot.go)
	jr     *journal // nil in memory
	closed bool
	txns   txnState // open transactions (txn.go)

	compactMu sync.Mutex   // serializes compactions and journal syncs
	compactAt atomic.Int64 // journal size that triggers a compaction

	stop chan struct{} // closed by Close: stops the background goroutine
	done chan struct{} // closed when the background goroutine has returned
}

// Open opens a store. With cfg.Dir set it loads the data kept there (and
// creates the directory if needed), and starts a background goroutine that
// syncs the journal to disk every 100 ms and compacts it; Close stops it.
func Open(cfg Config) (*Store, error) {
	s := &Store{
		cfg:   cfg,
		fs:    cfg.FS,
		log:   cfg.Logger,
		oplog: newOplog(cfg.OplogBytes, cfg.OplogMinRetention),
		dbs:   make(map[string]map[string]*collection),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.fs == nil {
		s.fs = faultfs.OS
	}
	// The clock starts at the current second, so that the cluster time is
	// meaningful before the first write.
	s.observe(bson.Timestamp{T: uint32(time.Now().Unix())})
	if cfg.Dir == "" {
		s.rsID = bson.NewObjectID()
	} else if err := s.load(); err != nil {
		if s.jr != nil {
			s.jr.close()
		}
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	s.hist.floor = s.ClusterTime() // no history before the opening
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.background()
	return s, nil
}

// Close syncs and closes the journal and stops background work. Operations
// after Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jr != nil {
		err := s.jr.close()
		s.jr = nil
		if err != nil {
			return fmt.Errorf("close journal: %w", err)
		}
	}
	return nil
}

// ReplicaSetID is the store's identity, persisted with its data.
func (s *Store) ReplicaSetID() bson.ObjectID { return s.rsID }

// ClusterTime returns the newest cluster time issued.
func (s *Store) ClusterTime() bson.Timestamp {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	return s.clock
}

// noopInterval returns the configured idle interval, 0 if disabled.
func (s *Store) noopInterval() time.Duration {
	switch iv := s.cfg.NoopInterval; {
	case iv < 0:
		return 0
	case iv == 0:
		return 10 * time.Second
	default:
		return iv
	}
}

// noop advances the cluster time if nothing was written for a whole
// interval. It runs under the write lock, so every write that takes an
// earlier time is already in the oplog: a change stream may report the
// new time as scanned, with nothing missed.
func (s *Store) noop(now time.Time, iv time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	last := s.oplog.Newest()
	if now.Sub(time.Unix(int64(last.T), 0)) < iv {
		return
	}
	s.oplog.advance(s.tick(now))
}

// Now advances the cluster clock and returns the fresh time.
func (s *Store) Now() bson.Timestamp { return s.tick(time.Now()) }

// tick issues the next cluster time: the current second, or the next
// increment within the newest second issued.
func (s *Store) tick(now time.Time) bson.Timestamp {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	sec := uint32(now.Unix())
	if sec > s.clock.T {
		s.clock = bson.Timestamp{T: sec, I: 1}
	} else {
		s.clock.I++
	}
	return s.clock
}

// observe moves the clock forward to at least ts (used when loading).
func (s *Store) observe(ts bson.Timestamp) {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	if tsLess(s.clock, ts) {
		s.clock = ts
	}
}

// Oplog returns the store's oplog.
func (s *Store) Oplog() *Oplog { return s.oplog }

var errClosed = mongoerr.New(mongoerr.ShutdownInProgress, "the store is closed")

// tx is one write command in progress, holding the store's write lock. Its
// entries are journaled and appended to the oplog when it ends.
type tx struct {
	s       *Store
	wall    time.Time
	entries []OplogEntry
	txn     *Txn          // the transaction this statement belongs to, or nil
	undo    []undoRec     // only in a transaction, or while one is open
	hist    []pendingHist // pre-images to keep for open transactions
	kept    []keptVersion // the snapshot history's versions, kept once the write commits
}

// emit records a write: it takes the next cluster time.
func (t *tx) emit(e OplogEntry) {
	e.TS = t.s.tick(t.wall)
	e.Wall = t.wall
	e.Size = entrySize(&e)
	t.entries = append(t.entries, e)
}

// write runs fn as one atomic write command: under the write lock, its
// changes are journaled (written to the operating system, so that they
// survive the process being killed) before the lock is released and the
// command is acknowledged, then appended to the oplog in the same order.
func (s *Store) write(fn func(t *tx) error) error {
	for {
		blocked, err := s.writeOnce(fn)
		if blocked == nil {
			return err
		}
		// A document it meets belongs to an open transaction: what it did
		// was taken back; run it again once that transaction ends.
		select {
		case <-blocked:
		case <-s.stop:
			return errClosed
		}
	}
}

func (s *Store) writeOnce(fn func(t *tx) error) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.broken != nil {
		return nil, brokenError(s.broken)
	}
	t := &tx{s: s, wall: time.Now().Truncate(time.Millisecond)}
	err := fn(t)
	var b *blockedError
	if errors.As(err, &b) {
		s.undoLocked(t.undo)
		return b.done, nil
	}
	if len(t.entries) == 0 {
		return nil, err
	}
	if s.jr != nil {
		if jerr := s.jr.append(t.entries); jerr != nil {
			s.broken = jerr
			s.log.Error("journal write failed; refusing further writes", "err", jerr)
			return nil, brokenError(jerr)
		}
	}
	if len(t.hist) > 0 {
		s.recordHistoryLocked(t.entries[len(t.entries)-1].TS, t.hist)
	}
	s.hist.keepWrite(t.entries, t.kept)
	s.oplog.append(t.wall, t.entries...)
	return nil, err
}

// Broken returns the journal failure after which the store refuses
// writes, as a command error, or nil. Its memory may then hold a write
// the journal does not (applied before the journal write failed), so the
// server answers nothing from it until a restart, as mongod stops on a
// failed journal write.
func (s *Store) Broken() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.broken == nil {
		return nil
	}
	return brokenError(s.broken)
}

// brokenError is the command error for a store whose journal failed:
// OutOfDiskSpace when the disk is full, as mongod says it.
func brokenError(cause error) error {
	code := mongoerr.InternalError
	if errors.Is(cause, syscall.ENOSPC) {
		code = mongoerr.OutOfDiskSpace
	}
	return mongoerr.New(code, "the store refuses writes after a journal failure: %v; nothing is answered from it until a restart, which recovers every acknowledged write", cause)
}

// WaitDurable returns once every write applied before the call is on
// disk: the journal holding it is fsynced. Writers that wait at the same
// time share one fsync. Without a data directory it returns at once. An
// fsync that fails makes the store refuse writes from then on, as a failed
// journal write does.
func (s *Store) WaitDurable() error {
	s.mu.RLock()
	jr, broken, closed := s.jr, s.broken, s.closed
	s.mu.RUnlock()
	switch {
	case broken != nil:
		return brokenError(broken)
	case jr == nil && closed:
		return errClosed
	case jr == nil:
		return nil
	}
	err := jr.sync()
	if errors.Is(err, errJournalClosed) {
		// A compaction or Close closed it, and its final sync failed.
		s.mu.RLock()
		broken, closed = s.broken, s.closed
		s.mu.RUnlock()
		if broken != nil {
			return brokenError(broken)
		}
		if closed {
			return errClosed
		}
	}
	if err != nil {
		s.mu.Lock()
		if s.broken == nil {
			s.broken = fmt.Errorf("sync journal: %w", err)
			s.log.Error("journal sync failed; refusing further writes", "err", err)
		}
		s.mu.Unlock()
		return mongoerr.New(mongoerr.InternalError, "sync journal: %v", err)
	}
	return nil
}

// read runs fn under the read lock.
func (s *Store) read(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	return fn()
}

func (s *Store) collLocked(ns Namespace) *collection {
	return s.dbs[ns.DB][ns.Coll]
}

// ListDatabases lists the databases that hold at least one collection.
func (s *Store) ListDatabases() []DatabaseInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]DatabaseInfo, 0, len(s.dbs))
	for name, colls := range s.dbs {
		if len(colls) == 0 {
			continue
		}
		var size int64
		empty := true
		for _, c := range colls {
			size += c.size
			if c.live > 0 {
				empty = false
			}
		}
		out = append(out, DatabaseInfo{Name: name, SizeOnDisk: size, Empty: empty})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ListCollections lists the collections of db, sorted by name.
func (s *Store) ListCollections(db string) []CollectionInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]CollectionInfo, 0, len(s.dbs[db]))
	for _, c := range s.dbs[db] {
		if s.madeByOtherLocked(nil, c) == nil { // not one an open transaction created
			out = append(out, c.info)
			if c.ts != nil {
				out = append(out, bucketsInfo(c.info))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Collection returns a collection's description.
func (s *Store) Collection(ns Namespace) (CollectionInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := s.collLocked(ns)
	if c == nil {
		return CollectionInfo{}, false
	}
	return c.info, true
}

// validNamespace checks database and collection names as MongoDB does.
func validNamespace(ns Namespace) error {
	if ns.DB == "" {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: ''")
	}
	if i := slices.IndexFunc([]rune(ns.DB), func(r rune) bool { return slices.Contains([]rune("/\\. \"$\x00"), r) }); i >= 0 {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: '%s'", ns.DB)
	}
	if ns.Coll == "" {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.'", ns.DB)
	}
	for _, r := range ns.Coll {
		if r == '$' || r == 0 {
			return mongoerr.New(mongoerr.InvalidNamespace, "Invalid collection name: %s", ns.Coll)
		}
	}
	if len(ns.DB)+1+len(ns.Coll) > 255 {
		return mongoerr.New(mongoerr.InvalidNamespace, "Fully qualified namespace is too long. Namespace: %s Max: 255", ns)
	}
	return nil
}

// asMongo converts any error into a *mongoerr.Error.
func asMongo(err error) *mongoerr.Error {
	if err == nil {
		return nil
	}
	if me, ok := mongoerr.As(err); ok {
		return me
	}
	return mongoerr.New(mongoerr.InternalError, "%v", err)
}
