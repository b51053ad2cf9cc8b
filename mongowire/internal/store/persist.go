package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
)

// Files in the data directory. The journal is a sequence of generations;
// a snapshot of generation G holds the state before journal G, so loading
// reads the snapshot, then journals G, G+1, ... in order.
const (
	snapshotFile  = "snapshot.tide"
	journalPrefix = "journal-"
	journalSuffix = ".tide"

	// record kinds
	kindMeta  = 'm' // {rs, gen, clock, newest, evicted}
	kindColl  = 'c' // a collection of a snapshot: {db, coll, uuid, options, indexes}
	kindDoc   = 'd' // a document of the last collection record
	kindOplog = 'o' // a retained oplog entry of a snapshot (not applied)
	kindEntry = 'e' // a journaled write: applied and appended to the oplog
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// minCompactSize is the journal size past which a compaction is due (or
// past the last snapshot's size, if larger). Tests lower it.
var minCompactSize int64 = 64 << 20

// syncInterval is how often the journal is synced to disk (MongoDB's
// journal commit interval is 100 ms too). Tests shorten it.
var syncInterval = 100 * time.Millisecond

// appendRecord frames a record: length, CRC-32C of kind and payload, kind,
// payload. A torn write at the end of a file fails the length or the CRC.
func appendRecord(dst []byte, kind byte, payload []byte) []byte {
	var hdr [9]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(payload)))
	crc := crc32.Update(crc32.Update(0, crcTable, []byte{kind}), crcTable, payload)
	binary.LittleEndian.PutUint32(hdr[4:], crc)
	hdr[8] = kind
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

var errTorn = errors.New("torn or corrupt record")

// readRecord reads one record; io.EOF at a clean end, errTorn for a
// partial or corrupt one.
func readRecord(r *bufio.Reader) (kind byte, payload []byte, err error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return 0, nil, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return 0, nil, errTorn
		}
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[0:])
	if n > 1<<30 {
		return 0, nil, errTorn
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, nil, errTorn
		}
		return 0, nil, err
	}
	crc := crc32.Update(crc32.Update(0, crcTable, hdr[8:9]), crcTable, payload)
	if crc != binary.LittleEndian.Uint32(hdr[4:]) {
		return 0, nil, errTorn
	}
	return hdr[8], payload, nil
}

// journal is the append-only log of writes of one generation.
type journal struct {
	f    faultfs.File
	gen  uint64
	size atomic.Int64 // bytes written to the operating system
	buf  []byte

	// syncMu lets one fsync run at a time. A writer that waits for its
	// bytes to be on disk queues behind the fsync in progress and usually
	// finds them covered once it gets the lock: concurrent writers share
	// one fsync (group commit).
	syncMu sync.Mutex
	synced atomic.Int64 // bytes known to be on disk
	closed bool         // guarded by syncMu
}

var errJournalClosed = errors.New("journal closed before it was synced")

func journalPath(dir string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016d%s", journalPrefix, gen, journalSuffix))
}

// append writes the entries with one write(2): once it returns, they
// survive the process being killed; syncTo, or the syncer within
// syncInterval, makes them survive a power loss.
func (j *journal) append(entries []OplogEntry) error {
	buf := j.buf[:0]
	var err error
	for i := range entries {
		start := len(buf)
		buf = append(buf, make([]byte, 9)...)
		if buf, err = encodeEntry(buf, &entries[i]); err != nil {
			return err
		}
		payload := buf[start+9:]
		binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
		crc := crc32.Update(crc32.Update(0, crcTable, []byte{kindEntry}), crcTable, payload)
		binary.LittleEndian.PutUint32(buf[start+4:], crc)
		buf[start+8] = kindEntry
	}
	if cap(buf) <= 1<<20 {
		j.buf = buf
	}
	if _, err := j.f.Write(buf); err != nil {
		// Cut what part of the write reached the file, so that a restart
		// finds none of this write's entries: the write failed, and one
		// write command is all or nothing. Truncating needs no new space.
		if terr := j.f.Truncate(j.size.Load()); terr != nil {
			return errors.Join(err, fmt.Errorf("cut the failed write from the journal: %w", terr))
		}
		return err
	}
	j.size.Add(int64(len(buf)))
	return nil
}

// syncTo returns once the journal's first off bytes are on disk. It
// fsyncs everything written so far, so the writers that queue behind it
// find their bytes covered and need no fsync of their own.
func (j *journal) syncTo(off int64) error {
	if j.synced.Load() >= off {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced.Load() >= off {
		return nil
	}
	if j.closed {
		return errJournalClosed
	}
	end := j.size.Load()
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.synced.Store(end)
	return nil
}

// sync syncs everything written so far.
func (j *journal) sync() error { return j.syncTo(j.size.Load()) }

func (j *journal) close() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	end := j.size.Load()
	err := j.f.Sync()
	if err == nil {
		j.synced.Store(end)
	}
	return errors.Join(err, j.f.Close())
}

// meta is the header of a snapshot and of a journal.
type meta struct {
	RS      bson.ObjectID  `bson:"rs"`
	Gen     int64          `bson:"gen"`
	Clock   bson.Timestamp `bson:"clock"`
	Newest  bson.Timestamp `bson:"newest"`
	Evicted bson.Timestamp `bson:"evicted"`
}

// createJournal starts journal generation gen.
func (s *Store) createJournal(gen uint64) (*journal, error) {
	f, err := s.fs.OpenFile(journalPath(s.cfg.Dir, gen), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	m, _ := bson.Marshal(meta{RS: s.rsID, Gen: int64(gen)})
	rec := appendRecord(nil, kindMeta, m)
	if _, err := f.Write(rec); err != nil {
		// A full disk, say: remove the torn file, or every later try at
		// this generation would find it and fail until a restart.
		f.Close()
		return nil, errors.Join(err, s.fs.Remove(journalPath(s.cfg.Dir, gen)))
	}
	j := &journal{f: f, gen: gen}
	j.size.Store(int64(len(rec)))
	if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// journalGens lists the journal generations present, in order.
func journalGens(dir string) ([]uint64, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, n := range names {
		name := n.Name()
		if !strings.HasPrefix(name, journalPrefix) || !strings.HasSuffix(name, journalSuffix) {
			continue
		}
		g, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, journalPrefix), journalSuffix), 10, 64)
		if err == nil {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// load restores the store from its directory: the snapshot, then the
// journals after it. A torn record at the end of the last journal (a crash
// in the middle of a write, which was therefore never acknowledged) is cut
// off with a warning.
func (s *Store) load() error {
	dir := s.cfg.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s.compactAt.Store(minCompactSize)
	gen := uint64(1)
	haveRS := false
	snap, err := s.loadSnapshot()
	if err != nil {
		return err
	}
	if snap != nil {
		s.rsID, haveRS, gen = snap.RS, true, uint64(snap.Gen)
	}
	gens, err := journalGens(dir)
	if err != nil {
		return err
	}
	var last uint64
	for i, g := range gens {
		if g < gen {
			if err := s.fs.Remove(journalPath(dir, g)); err != nil {
				return err
			}
			continue
		}
		rs, err := s.replayJournal(g, i == len(gens)-1)
		if err != nil {
			return err
		}
		if !haveRS && !rs.IsZero() {
			s.rsID, haveRS = rs, true
		}
		last = g
	}
	if !haveRS {
		s.rsID = bson.NewObjectID()
	}
	if last != 0 {
		f, err := s.fs.OpenFile(journalPath(dir, last), os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		s.jr = &journal{f: f, gen: last}
		s.jr.size.Store(st.Size())
		if st.Size() > s.compactAt.Load() {
			s.compactAt.Store(0) // compact soon: the journal is long
		}
		return nil
	}
	s.jr, err = s.createJournal(gen)
	return err
}

func (s *Store) loadSnapshot() (*meta, error) {
	f, err := os.Open(filepath.Join(s.cfg.Dir, snapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var m *meta
	var c *collection
	var ns Namespace
	var oplog []OplogEntry
	pendingIdx := map[*collection][]IndexSpec{}
	nsOf := map[*collection]Namespace{}
	for {
		kind, payload, err := readRecord(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read snapshot: %w", err)
		}
		switch kind {
		case kindMeta:
			m = &meta{}
			if err := bson.Unmarshal(payload, m); err != nil {
				return nil, fmt.Errorf("read snapshot header: %w", err)
			}
		case kindColl:
			var cr collRecord
			if err := bson.Unmarshal(payload, &cr); err != nil {
				return nil, fmt.Errorf("read snapshot collection: %w", err)
			}
			ns = Namespace{DB: cr.DB, Coll: cr.Coll}
			c = s.createLocked(ns, cr.UUID, cr.Options)
			nsOf[c] = ns
			for _, d := range cr.Indexes[1:] {
				pendingIdx[c] = append(pendingIdx[c], specFromDoc(d))
			}
		case kindDoc:
			if c == nil {
				return nil, errors.New("read snapshot: a document before any collection")
			}
			c.appendLoaded(payload)
		case kindOplog:
			e, err := decodeEntry(payload)
			if err != nil {
				return nil, fmt.Errorf("read snapshot oplog: %w", err)
			}
			oplog = append(oplog, e)
		}
	}
	if m == nil {
		return nil, errors.New("read snapshot: no header")
	}
	for c, ns := range nsOf {
		for _, spec := range pendingIdx[c] {
			ix, err := newIndex(spec)
			if err != nil {
				return nil, fmt.Errorf("read snapshot: %s index %s: %w", ns, spec.Name, err)
			}
			c.indexes = append(c.indexes, ix)
		}
		if werr := c.rebuildIndexes(ns); werr != nil {
			return nil, fmt.Errorf("read snapshot: %s: %w", ns, werr)
		}
	}
	s.observe(m.Clock)
	s.oplog.restore(oplog, m.Newest, m.Evicted)
	return m, nil
}

type collRecord struct {
	DB      string      `bson:"db"`
	Coll    string      `bson:"coll"`
	UUID    bson.Binary `bson:"uuid"`
	Options bson.D      `bson:"options"`
	Indexes []bson.D    `bson:"indexes"`
}

// replayJournal applies a journal generation. last says whether it is the
// newest one, whose torn tail may be cut.
func (s *Store) replayJournal(gen uint64, last bool) (bson.ObjectID, error) {
	path := journalPath(s.cfg.Dir, gen)
	f, err := os.Open(path)
	if err != nil {
		return bson.ObjectID{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var rs bson.ObjectID
	var off int64
	var batch []OplogEntry
	flush := func() {
		s.oplog.restoreAppend(batch)
		batch = batch[:0]
	}
	defer flush()
	// A transaction's entries are applied once its last one is read: one
	// cut short by a crash (only the newest journal's end can be) is cut
	// off whole.
	var txn []OplogEntry
	var txnOff int64
	for {
		kind, payload, err := readRecord(r)
		if (err == io.EOF || errors.Is(err, errTorn)) && len(txn) > 0 && last {
			s.log.Warn("journal ends within a transaction; cutting it off", "journal", filepath.Base(path), "offset", txnOff, "entries", len(txn))
			return rs, s.truncate(path, txnOff)
		}
		if err == io.EOF {
			return rs, nil
		}
		if errors.Is(err, errTorn) && last {
			s.log.Warn("journal ends with a torn record; cutting it off", "journal", filepath.Base(path), "offset", off)
			return rs, s.truncate(path, off)
		}
		if err != nil {
			return rs, fmt.Errorf("read %s at %d: %w", filepath.Base(path), off, err)
		}
		off += int64(9 + len(payload))
		switch kind {
		case kindMeta:
			var m meta
			if err := bson.Unmarshal(payload, &m); err != nil {
				return rs, fmt.Errorf("read %s header: %w", filepath.Base(path), err)
			}
			rs = m.RS
		case kindEntry:
			e, err := decodeEntry(payload)
			if err != nil {
				return rs, fmt.Errorf("read %s at %d: %w", filepath.Base(path), off, err)
			}
			if e.Txn != nil {
				if len(txn) == 0 {
					txnOff = off - int64(9+len(payload))
				}
				if txn = append(txn, e); !e.Txn.Last {
					continue
				}
			} else {
				txn = append(txn, e)
			}
			for i := range txn {
				if err := s.apply(&txn[i]); err != nil {
					return rs, fmt.Errorf("replay %s %s at %d: %w", txn[i].Op, txn[i].NS, off, err)
				}
				s.observe(txn[i].TS)
				batch = append(batch, txn[i])
			}
			txn = txn[:0]
			if len(batch) >= 4096 {
				flush()
			}
		}
	}
}

// truncate cuts a journal's torn tail off, durably: the writes appended
// next must not follow the torn bytes.
func (s *Store) truncate(path string, size int64) error {
	f, err := s.fs.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// apply redoes a journaled write on the in-memory state.
func (s *Store) apply(e *OplogEntry) error {
	c := s.collLocked(e.NS)
	needColl := func() error {
		if c == nil {
			return fmt.Errorf("collection does not exist")
		}
		return nil
	}
	switch e.Op {
	case "create":
		opts, _ := lookupD(e.Extra, "options").(bson.D)
		if len(opts) == 0 {
			opts = nil
		}
		s.createLocked(e.NS, e.UUID, opts)
	case "insert":
		if err := needColl(); err != nil {
			return err
		}
		if werr := c.insert(e.NS, e.Doc); werr != nil {
			return werr
		}
	case "update", "replace":
		if err := needColl(); err != nil {
			return err
		}
		p := c.byID(idOf(e.DocKey))
		if p < 0 {
			return fmt.Errorf("document %v not found", e.DocKey)
		}
		if werr := c.replace(e.NS, p, e.Doc); werr != nil {
			return werr
		}
	case "delete":
		if err := needColl(); err != nil {
			return err
		}
		p := c.byID(idOf(e.DocKey))
		if p < 0 {
			return fmt.Errorf("document %v not found", e.DocKey)
		}
		c.remove(p)
	case "drop":
		s.dropLocked(e.NS)
	case "dropDatabase":
		delete(s.dbs, e.NS.DB)
	case "rename":
		if err := needColl(); err != nil {
			return err
		}
		to, _ := lookupD(e.Extra, "to").(string)
		s.renameLocked(e.NS, parseNamespace(to))
	case "createIndexes":
		if err := needColl(); err != nil {
			return err
		}
		ix, err := newIndex(specFromDoc(firstIndexDoc(e.Extra)))
		if err != nil {
			return err
		}
		if werr := c.addIndex(e.NS, ix); werr != nil {
			return werr
		}
	case "dropIndexes":
		if err := needColl(); err != nil {
			return err
		}
		name := specFromDoc(firstIndexDoc(e.Extra)).Name
		if c.index(name) == nil {
			return fmt.Errorf("index %s not found", name)
		}
		dropIndexLocked(c, name)
	case "modify":
		if err := needColl(); err != nil {
			return err
		}
		collModLocked(c, e.Extra)
	default:
		return fmt.Errorf("unknown operation %q", e.Op)
	}
	return nil
}

// background is the store's one goroutine, started by Open and stopped by
// Close. With a data directory it syncs the journal every syncInterval and
// compacts it when it has grown; in every store it advances an idle
// cluster clock every noop interval.
func (s *Store) background() {
	defer close(s.done)
	var syncC, noopC <-chan time.Time
	iv := syncInterval
	if s.cfg.SyncInterval != 0 {
		iv = s.cfg.SyncInterval
	}
	if s.cfg.Dir != "" && iv > 0 { // s.jr itself is replaced by compactions
		t := time.NewTicker(iv)
		defer t.Stop()
		syncC = t.C
	}
	noopIv := s.noopInterval()
	if noopIv > 0 {
		t := time.NewTicker(noopIv)
		defer t.Stop()
		noopC = t.C
	}
	var ttlC <-chan time.Time
	if ttlIv := s.ttlInterval(); ttlIv > 0 {
		t := time.NewTicker(ttlIv)
		defer t.Stop()
		ttlC = t.C
	}
	for {
		select {
		case <-s.stop:
			return
		case now := <-ttlC:
			s.ttlPass(now)
		case now := <-noopC:
			s.noop(now, noopIv)
		case <-syncC:
			s.syncJournal()
		}
	}
}

// syncJournal syncs the journal and compacts it when it has grown.
func (s *Store) syncJournal() {
	s.mu.RLock()
	jr := s.jr
	s.mu.RUnlock()
	if jr == nil {
		return
	}
	// Syncing outside the lock lets writes go on; compact, the only
	// other closer of a journal, runs on this goroutine or is
	// serialized with it by compactMu.
	s.compactMu.Lock()
	if err := jr.sync(); err != nil {
		s.log.Error("sync journal", "err", err)
	}
	s.compactMu.Unlock()
	if jr.size.Load() > s.compactAt.Load() {
		if err := s.compact(); err != nil {
			s.log.Error("compact journal", "err", err)
			s.compactAt.Store(jr.size.Load() * 2)
		}
	}
}

// frozen is the state captured for a snapshot: immutable documents
// referenced, not copied.
type frozen struct {
	meta  meta
	colls []frozenColl
	oplog []OplogEntry
}

type frozenColl struct {
	rec  collRecord
	docs []bson.Raw
}

// compact writes a snapshot and removes the journals it covers. The state
// is captured under the write lock together with a switch to a new journal
// generation; the snapshot is then written without holding the lock.
func (s *Store) compact() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.mu.Lock()
	if s.jr == nil {
		s.mu.Unlock()
		return errClosed
	}
	fr := frozen{}
	old := s.jr
	// The old journal must be whole on disk before the next one exists:
	// load cuts a torn tail off the newest journal only.
	if err := old.sync(); err != nil {
		s.mu.Unlock()
		return err
	}
	next, err := s.createJournal(old.gen + 1)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if err := old.close(); err != nil {
		// Writes acknowledged as journaled may not be on disk.
		s.broken = fmt.Errorf("close journal: %w", err)
		s.log.Error("journal sync failed; refusing further writes", "err", err)
	}
	s.jr = next
	dbs := make([]string, 0, len(s.dbs))
	for db := range s.dbs {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	for _, db := range dbs {
		for name, c := range s.dbs[db] {
			idx := make([]bson.D, 0, len(c.indexes))
			for _, spec := range c.specs() {
				idx = append(idx, indexDoc(spec))
			}
			fr.colls = append(fr.colls, frozenColl{
				rec:  collRecord{DB: db, Coll: name, UUID: c.info.UUID, Options: c.info.Options, Indexes: idx},
				docs: s.docsAsLocked(nil, Namespace{DB: db, Coll: name}, c), // without open transactions' writes
			})
		}
	}
	var newest, evicted bson.Timestamp
	fr.oplog, newest, evicted = s.oplog.retained()
	fr.meta = meta{RS: s.rsID, Gen: int64(next.gen), Clock: s.ClusterTime(), Newest: newest, Evicted: evicted}
	s.mu.Unlock()

	size, err := s.writeSnapshot(&fr)
	if err != nil {
		return err
	}
	s.compactAt.Store(max(minCompactSize, size))
	gens, err := journalGens(s.cfg.Dir)
	if err != nil {
		return err
	}
	for _, g := range gens {
		if g < next.gen {
			if err := s.fs.Remove(journalPath(s.cfg.Dir, g)); err != nil {
				return err
			}
		}
	}
	s.log.Debug("compacted journal", "generation", next.gen, "snapshot_bytes", size)
	return nil
}

// writeSnapshot writes the snapshot atomically: a temporary file, synced,
// renamed over the old one, and the directory synced.
func (s *Store) writeSnapshot(fr *frozen) (int64, error) {
	tmp := filepath.Join(s.cfg.Dir, snapshotFile+".tmp")
	f, err := faultfs.Create(s.fs, tmp)
	if err != nil {
		return 0, err
	}
	defer s.fs.Remove(tmp)
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	put := func(kind byte, payload []byte) error {
		rec := appendRecord(nil, kind, payload)
		size += int64(len(rec))
		_, err := w.Write(rec)
		return err
	}
	m, err := bson.Marshal(fr.meta)
	if err != nil {
		f.Close()
		return 0, err
	}
	err = put(kindMeta, m)
	for _, c := range fr.colls {
		if err != nil {
			break
		}
		var rec []byte
		if rec, err = bson.Marshal(c.rec); err != nil {
			break
		}
		err = put(kindColl, rec)
		for _, d := range c.docs {
			if err != nil {
				break
			}
			err = put(kindDoc, d)
		}
	}
	var buf []byte
	for i := range fr.oplog {
		if err != nil {
			break
		}
		if buf, err = encodeEntry(buf[:0], &fr.oplog[i]); err == nil {
			err = put(kindOplog, buf)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, filepath.Join(s.cfg.Dir, snapshotFile))
	}
	if err == nil {
		err = s.fs.SyncDir(s.cfg.Dir)
	}
	if err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	return size, nil
}
