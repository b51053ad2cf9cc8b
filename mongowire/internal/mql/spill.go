package mql

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// External sorting for $sort and $group past the stage memory limit, as
// mongod does by default since 6.0 (allowDiskUseByDefault): the buffered
// documents are sorted and written to a run file, and when the input
// ends the runs are merged, holding one document per run in memory.
// $group sorts by group key, so that each group's documents come out of
// the merge together and are folded one group at a time.

// record is a document and the key it is sorted by (nil for $sort, which
// compares the documents).
type record struct {
	key []byte
	doc bson.Raw
}

// stageBuffer holds the input of a blocking stage that can spill.
type stageBuffer struct {
	c     *runCtx
	name  string
	docs  []bson.Raw
	bytes int64
}

// add buffers d. full reports that the buffer passed the stage limit and
// must be spilled now; with allowDiskUse: false it is an error instead.
func (b *stageBuffer) add(d bson.Raw) (full bool, err error) {
	n := int64(len(d)) + docOverhead
	if err := b.c.mem.grow(n); err != nil {
		return false, err
	}
	b.bytes += n
	b.docs = append(b.docs, d)
	if b.bytes <= b.c.lim.stageBytes() {
		return false, nil
	}
	if b.c.lim.NoDiskUse {
		return false, errStageMemory(b.name, b.c.lim.stageBytes(), true)
	}
	return true, nil
}

func (b *stageBuffer) reset() {
	b.c.mem.shrink(b.bytes)
	b.docs, b.bytes = nil, 0
}

// spill is the sorted runs one stage wrote to disk.
type spill struct {
	c     *runCtx
	files []*os.File
}

// write writes recs, sorted, as a new run.
func (s *spill) write(recs []record) error {
	if len(s.files) == 0 {
		s.c.cleanup = append(s.c.cleanup, s.remove)
	}
	f, err := os.CreateTemp(s.c.tempDir(), "tide-spill-*")
	if err != nil {
		return fmt.Errorf("spill to disk: %w", err)
	}
	s.files = append(s.files, f)
	w := bufio.NewWriterSize(f, 64<<10)
	var n [binary.MaxVarintLen64]byte
	for _, r := range recs {
		w.Write(n[:binary.PutUvarint(n[:], uint64(len(r.key)))])
		w.Write(r.key)
		w.Write(r.doc)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("spill to disk: %w", err)
	}
	return nil
}

// remove closes and deletes the run files; it may be called again.
func (s *spill) remove() {
	for _, f := range s.files {
		f.Close()
		os.Remove(f.Name())
	}
	s.files = nil
}

// runReader reads one run back.
type runReader struct {
	r   *bufio.Reader
	cur record
	idx int // the run's number: earlier runs win ties, which keeps the sort stable
}

func (rr *runReader) next() (bool, error) {
	kl, err := binary.ReadUvarint(rr.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read spill: %w", err)
	}
	key := make([]byte, kl)
	if _, err := io.ReadFull(rr.r, key); err != nil {
		return false, fmt.Errorf("read spill: %w", err)
	}
	var l [4]byte
	if _, err := io.ReadFull(rr.r, l[:]); err != nil {
		return false, fmt.Errorf("read spill: %w", err)
	}
	n := binary.LittleEndian.Uint32(l[:])
	if n < 5 {
		return false, fmt.Errorf("read spill: bad document length %d", n)
	}
	doc := make([]byte, n)
	copy(doc, l[:])
	if _, err := io.ReadFull(rr.r, doc[4:]); err != nil {
		return false, fmt.Errorf("read spill: %w", err)
	}
	rr.cur = record{key: key, doc: doc}
	return true, nil
}

type mergeHeap struct {
	runs []*runReader
	cmp  func(a, b record) int
}

func (h *mergeHeap) Len() int { return len(h.runs) }
func (h *mergeHeap) Less(i, j int) bool {
	if c := h.cmp(h.runs[i].cur, h.runs[j].cur); c != 0 {
		return c < 0
	}
	return h.runs[i].idx < h.runs[j].idx
}
func (h *mergeHeap) Swap(i, j int) { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *mergeHeap) Push(x any)    { h.runs = append(h.runs, x.(*runReader)) }
func (h *mergeHeap) Pop() any {
	x := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return x
}

// merge passes the records of all runs to fn in cmp order, then removes
// the runs. fn returning errEnough stops the merge without error.
func (s *spill) merge(cmp func(a, b record) int, fn func(record) error) error {
	defer s.remove()
	h := &mergeHeap{cmp: cmp}
	for i, f := range s.files {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("read spill: %w", err)
		}
		rr := &runReader{r: bufio.NewReaderSize(f, 32<<10), idx: i}
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			h.runs = append(h.runs, rr)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		rr := h.runs[0]
		if err := fn(rr.cur); err == errEnough {
			return nil
		} else if err != nil {
			return err
		}
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// sortProc is a running $sort. Followed by a $limit, it keeps only the
// first limit documents: when it holds twice as many, or is past the
// stage limit, it sorts them and drops the rest.
type sortProc struct {
	s     *Sort
	limit int64
	buf   stageBuffer
	spill spill
	next  proc
}

func newSortProc(c *runCtx, name string, s sortStage, next proc) *sortProc {
	return &sortProc{s: s.s, limit: s.limit, buf: stageBuffer{c: c, name: name}, spill: spill{c: c}, next: next}
}

func (p *sortProc) push(d bson.Raw) error {
	full, err := p.buf.add(d)
	if p.limit > 0 && (full || err != nil || int64(len(p.buf.docs)) >= 2*p.limit+64) {
		if err != nil && p.buf.bytes <= p.buf.c.lim.stageBytes() {
			return err // not a stage-limit error: the budget's
		}
		p.truncate()
		full, err = p.buf.bytes > p.buf.c.lim.stageBytes(), nil
		if full && p.buf.c.lim.NoDiskUse {
			err = errStageMemory(p.buf.name, p.buf.c.lim.stageBytes(), true)
		}
	}
	if err != nil || !full {
		return err
	}
	return p.spillBuffer()
}

// truncate keeps the first limit documents of the buffer in sort order.
// Ties keep their input order: the sort is stable, and the buffer holds
// documents in input order.
func (p *sortProc) truncate() {
	p.s.SortDocs(p.buf.docs)
	if int64(len(p.buf.docs)) <= p.limit {
		return
	}
	var dropped int64
	for _, d := range p.buf.docs[p.limit:] {
		dropped += int64(len(d)) + docOverhead
	}
	clear(p.buf.docs[p.limit:])
	p.buf.docs = p.buf.docs[:p.limit]
	p.buf.bytes -= dropped
	p.buf.c.mem.shrink(dropped)
}

func (p *sortProc) spillBuffer() error {
	p.s.SortDocs(p.buf.docs)
	recs := make([]record, len(p.buf.docs))
	for i, d := range p.buf.docs {
		recs[i].doc = d
	}
	err := p.spill.write(recs)
	p.buf.reset()
	return err
}

func (p *sortProc) end() error {
	if len(p.spill.files) == 0 {
		p.s.SortDocs(p.buf.docs)
		err := feed(p.next, p.buf.docs)
		p.buf.reset()
		return err
	}
	if len(p.buf.docs) > 0 {
		if err := p.spillBuffer(); err != nil {
			return err
		}
	}
	cmp := func(a, b record) int { return p.s.Compare(a.doc, b.doc) }
	if err := p.spill.merge(cmp, func(r record) error { return p.next.push(r.doc) }); err != nil {
		return err
	}
	return p.next.end()
}

// groupProc is a running $group. It folds documents into groups as they
// come, holding the groups (and, when the pipeline built its input, the
// input) to the stage limit, as mongod counts a $group's memory. Past
// the limit it spills: the input seen so far and the rest of it are
// sorted by group key into runs on disk, whose merge brings each
// group's documents together, folded one group at a time.
type groupProc struct {
	c      *runCtx
	name   string
	g      *groupStage
	built  bool // the input documents are the pipeline's own, not the collection's
	replay func(emit func(bson.Raw) error) error
	next   proc

	// In memory: the groups, and the input they came from, kept for a
	// spill (references to the collection's documents unless built)
	// unless the input can be replayed.
	gr   *grouper
	seen [][]bson.Raw // in chunks, so that keeping them never copies them

	// Spilling.
	buf   stageBuffer
	spill spill
}

func (p *groupProc) push(d bson.Raw) error {
	if p.gr == nil {
		return p.spillPush(d)
	}
	if p.replay == nil {
		p.keep(d)
	}
	if p.built {
		n := int64(len(d)) + docOverhead
		if err := p.c.mem.grow(n); err != nil {
			return err
		}
		p.gr.extra += n
	}
	err := errGroupsFull
	if p.gr.bytes+p.gr.extra <= p.c.lim.stageBytes() {
		err = p.gr.add(d)
	}
	if err != errGroupsFull {
		return err
	}
	if p.c.lim.NoDiskUse {
		return errStageMemory(p.name, p.c.lim.stageBytes(), true)
	}
	// Switch to spilling: the groups go, the input seen goes to disk.
	seen := p.seen
	p.c.mem.shrink(p.gr.extra)
	p.gr.release()
	p.gr, p.seen = nil, nil
	if p.replay != nil {
		return p.replay(p.spillPush)
	}
	for _, chunk := range seen {
		for _, d := range chunk {
			if err := p.spillPush(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// keep keeps d for a spill, in chunks that double up to 4096 documents.
func (p *groupProc) keep(d bson.Raw) {
	if len(p.seen) == 0 || len(p.seen[len(p.seen)-1]) == cap(p.seen[len(p.seen)-1]) {
		n := 64
		if len(p.seen) > 0 {
			n = min(4096, 2*cap(p.seen[len(p.seen)-1]))
		}
		p.seen = append(p.seen, make([]bson.Raw, 0, n))
	}
	p.seen[len(p.seen)-1] = append(p.seen[len(p.seen)-1], d)
}

func (p *groupProc) spillPush(d bson.Raw) error {
	full, err := p.buf.add(d)
	if err != nil || !full {
		return err
	}
	return p.spillBuffer()
}

func (p *groupProc) spillBuffer() error {
	ec := &evalCtx{now: p.c.now, coll: p.c.coll}
	recs := make([]record, len(p.buf.docs))
	for i, d := range p.buf.docs {
		_, key, err := groupKey(ec, p.g.id.evalIn, d, nil)
		if err != nil {
			return err
		}
		recs[i] = record{key: key, doc: d}
	}
	slices.SortStableFunc(recs, func(a, b record) int { return bytes.Compare(a.key, b.key) })
	err := p.spill.write(recs)
	p.buf.reset()
	return err
}

func (p *groupProc) end() error {
	if p.gr != nil {
		out := p.gr.results()
		p.c.mem.shrink(p.gr.extra)
		p.gr.release()
		p.gr, p.seen = nil, nil
		return feed(p.next, out)
	}
	if len(p.buf.docs) > 0 {
		if err := p.spillBuffer(); err != nil {
			return err
		}
	}
	var gr *grouper
	var key []byte
	flush := func() error {
		if gr == nil {
			return nil
		}
		out := gr.results()
		gr.release()
		gr = nil
		return p.next.push(out[0])
	}
	err := p.spill.merge(func(a, b record) int { return bytes.Compare(a.key, b.key) }, func(r record) error {
		if gr == nil || !bytes.Equal(r.key, key) {
			if err := flush(); err != nil {
				return err
			}
			gr = newGrouper(p.c, p.g.id.evalIn, p.g.accs)
			key = r.key
		}
		err := gr.add(r.doc)
		if err == errGroupsFull { // one group alone is past the limit
			return &mongoerr.Error{Code: codeNoDiskUse, CodeName: "QueryExceededMemoryLimitNoDiskUseAllowed",
				Message: fmt.Sprintf("one group of %s exceeded the memory limit of %d bytes; a single group cannot be spilled to disk", p.name, p.c.lim.stageBytes())}
		}
		return err
	})
	if err == nil {
		err = flush()
	}
	if err != nil && err != errEnough {
		return err
	}
	return p.next.end()
}
