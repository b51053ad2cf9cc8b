package mongowire

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// cursorSource produces the batches of one cursor. Next returns up to n
// documents within maxBytes (always at least one document if any remains
// and n > 0, even if that one alone exceeds maxBytes). For tailable
// awaitData cursors it may wait up to maxWait for the first document;
// other sources ignore maxWait. Extra fields (postBatchResumeToken) go
// into the cursor reply document after the batch. exhausted reports that
// the cursor has nothing more, ever; the server then closes it and
// replies with cursor id 0. Close releases the source; it is called
// exactly once, after the last Next.
//
// Sources other than a materialised result plug in here: the change-stream
// engine returns one from Server.openChangeStream.
type cursorSource interface {
	Next(ctx context.Context, n int, maxBytes int, maxWait time.Duration) (docs []bson.Raw, extra bson.D, exhausted bool, err error)
	Close()
}

// errorLabeler is an optional ability of a cursorSource: it labels the
// errors of a getMore on its cursor that do not come from Next (a fail
// point), as it labels its own — change streams add
// ResumableChangeStreamError, as mongod does.
type errorLabeler interface {
	LabelError(err error) error
}

// Batch limits, as mongod applies them.
const (
	defaultFirstBatch = 101
	maxBatchBytes     = 16 << 20
	defaultAwaitWait  = time.Second // getMore on an awaitData cursor without maxTimeMS
	maxDocumentBytes  = 16 << 20    // a document a reply may carry (BSONObjMaxUserSize)
)

// errDocumentTooLarge is the error of a result document over 16 MiB, which
// no reply can carry: 10334 BSONObjectTooLarge, as mongod reports it.
func errDocumentTooLarge(d bson.Raw) error {
	first := ""
	if e, err := d.IndexErr(0); err == nil {
		first = e.Key()
	}
	return mongoerr.New(mongoerr.BSONObjectTooLarge, "BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB) First element: %s", len(d), len(d), maxDocumentBytes, first)
}

// sliceSource serves a result computed up front (find, aggregate,
// listCollections, listIndexes).
type sliceSource struct {
	docs []bson.Raw
}

func (s *sliceSource) Next(_ context.Context, n, maxBytes int, _ time.Duration) ([]bson.Raw, bson.D, bool, error) {
	size, i := 0, 0
	for i < len(s.docs) && i < n {
		l := len(s.docs[i])
		if l > maxDocumentBytes {
			return nil, nil, true, errDocumentTooLarge(s.docs[i])
		}
		if i > 0 && size+l > maxBytes {
			break
		}
		size += l
		i++
	}
	batch := s.docs[:i:i]
	s.docs = s.docs[i:]
	return batch, nil, len(s.docs) == 0, nil
}

func (s *sliceSource) Close() { s.docs = nil }

// cursor is an open server-side cursor.
type cursor struct {
	id        int64
	ns        string // "db.coll", as the reply's ns says
	src       cursorSource
	tailable  bool
	awaitData bool
	owner     string // the authenticated user who opened it ("db.user"), "" for none

	// guarded by cursorTable.mu
	busy     bool
	lastUsed time.Time
}

// cursorTable holds the open cursors. Idle cursors time out lazily: any
// operation on the table sweeps those idle past the timeout, at most once
// a second, so no goroutine is needed.
type cursorTable struct {
	mu        sync.Mutex // guards the fields below
	cursors   map[int64]*cursor
	lastSweep time.Time
}

func (t *cursorTable) init() { t.cursors = make(map[int64]*cursor) }

func newCursorID() int64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if id := int64(binary.LittleEndian.Uint64(b[:]) &^ (1 << 63)); id != 0 {
			return id
		}
	}
}

// sweepLocked closes cursors idle longer than timeout.
func (t *cursorTable) sweepLocked(now time.Time, timeout time.Duration) []*cursor {
	if now.Sub(t.lastSweep) < time.Second && !t.lastSweep.IsZero() {
		return nil
	}
	t.lastSweep = now
	var dead []*cursor
	for id, c := range t.cursors {
		if !c.busy && now.Sub(c.lastUsed) > timeout {
			delete(t.cursors, id)
			dead = append(dead, c)
		}
	}
	return dead
}

func closeCursors(cs []*cursor) {
	for _, c := range cs {
		c.src.Close()
	}
}

func (s *Server) registerCursor(c *cursor) {
	now := s.now()
	t := &s.cursors
	t.mu.Lock()
	dead := t.sweepLocked(now, s.cfg.CursorTimeout)
	for {
		c.id = newCursorID()
		if _, taken := t.cursors[c.id]; !taken {
			break
		}
	}
	c.lastUsed = now
	t.cursors[c.id] = c
	t.mu.Unlock()
	closeCursors(dead)
}

// checkout marks the cursor busy for one getMore. A cursor idle past the
// timeout is closed and reported as not found, as mongod does.
func (s *Server) checkout(id int64, ns string) (*cursor, error) {
	now := s.now()
	t := &s.cursors
	t.mu.Lock()
	dead := t.sweepLocked(now, s.cfg.CursorTimeout)
	c, ok := t.cursors[id]
	if ok && !c.busy && now.Sub(c.lastUsed) > s.cfg.CursorTimeout {
		delete(t.cursors, id)
		dead = append(dead, c)
		ok = false
	}
	var err error
	switch {
	case !ok:
		err = mongoerr.New(mongoerr.CursorNotFound, "cursor id %d not found", id)
	case c.ns != ns:
		err = mongoerr.New(mongoerr.Unauthorized, "Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.ns)
	case c.busy:
		err = mongoerr.New(mongoerr.CursorInUse, "cursor id %d is already in use", id)
	default:
		c.busy = true
	}
	t.mu.Unlock()
	closeCursors(dead)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// checkin returns a cursor after a getMore; a finished one is removed and
// closed, as is one that killCursors removed while it was busy.
func (s *Server) checkin(c *cursor, finished bool) {
	t := &s.cursors
	t.mu.Lock()
	c.busy = false
	c.lastUsed = s.now()
	_, present := t.cursors[c.id]
	if finished && present {
		delete(t.cursors, c.id)
	}
	t.mu.Unlock()
	if finished || !present {
		c.src.Close()
	}
}

// cursorOwnerOf returns the owner of cursor id, if it exists.
func (s *Server) cursorOwnerOf(id int64) (owner, ns string, ok bool) {
	t := &s.cursors
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.cursors[id]
	if !ok {
		return "", "", false
	}
	return c.owner, c.ns, true
}

// kill closes the cursor if it exists and is idle.
func (s *Server) killCursor(id int64) bool {
	t := &s.cursors
	t.mu.Lock()
	c, ok := t.cursors[id]
	if ok {
		delete(t.cursors, id)
	}
	t.mu.Unlock()
	if ok && !c.busy {
		c.src.Close()
	}
	// A busy cursor is closed by its getMore: checkin finds it gone.
	return ok
}

func (t *cursorTable) closeAll() {
	t.mu.Lock()
	var all []*cursor
	for id, c := range t.cursors {
		delete(t.cursors, id)
		all = append(all, c)
	}
	t.mu.Unlock()
	closeCursors(all)
}

// cursorOptions shape a cursor's first reply.
type cursorOptions struct {
	batchSize   int64 // -1 = default
	singleBatch bool
	tailable    bool
	awaitData   bool
}

// openCursor takes the first batch from src and, unless that exhausts it,
// registers a cursor for getMore. The reply is {cursor: {firstBatch,
// extras..., id, ns}}.
func (s *Server) openCursor(ctx context.Context, ns string, src cursorSource, opts cursorOptions) (bson.D, error) {
	n := defaultFirstBatch
	if opts.batchSize >= 0 {
		n = int(min(opts.batchSize, 1<<31-1))
	}
	docs, extra, exhausted, err := src.Next(ctx, n, maxBatchBytes, 0)
	if err != nil {
		src.Close()
		return nil, err
	}
	var id int64
	if exhausted || opts.singleBatch {
		src.Close()
	} else {
		c := &cursor{ns: ns, src: src, tailable: opts.tailable, awaitData: opts.awaitData, owner: cursorOwner(ctx)}
		s.registerCursor(c)
		id = c.id
	}
	return cursorReply("firstBatch", docs, extra, id, ns), nil
}

func cursorReply(batchName string, docs []bson.Raw, extra bson.D, id int64, ns string) bson.D {
	batch := make(bson.A, len(docs))
	for i, d := range docs {
		batch[i] = d
	}
	cur := make(bson.D, 0, 3+len(extra))
	cur = append(cur, bson.E{Key: batchName, Value: batch})
	cur = append(cur, extra...)
	cur = append(cur, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: ns})
	return bson.D{{Key: "cursor", Value: cur}}
}

// cursorBatchSize reads cursor.batchSize of aggregate-like commands, or
// batchSize of find-like ones (field "batchSize" of doc); -1 when absent.
func cursorBatchSize(cmdName string, doc bson.Raw) (int64, error) {
	v, err := doc.LookupErr("batchSize")
	if err != nil || v.Type == bson.TypeNull {
		return -1, nil
	}
	n, err := asInt64(cmdName, "batchSize", v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, mongoerr.New(mongoerr.BadValue, "BatchSize value must be non-negative, but received: %d", n)
	}
	return n, nil
}

// cursorArg reads {cursor: {batchSize}} of listIndexes/listCollections/aggregate.
func cursorArg(r *request) (int64, error) {
	v, err := r.cmd.LookupErr("cursor")
	if err != nil {
		return -1, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return 0, typeMismatch(r.name, "cursor", v, "object")
	}
	return cursorBatchSize(r.name, d)
}
