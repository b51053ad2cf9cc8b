package mql

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Memory limits of a pipeline run, as mongod 7.0 sets them.
const (
	// DefaultStageBytes is what one blocking stage ($sort, $group,
	// $bucket, ...) may hold in memory before it spills to disk or, with
	// allowDiskUse: false, fails with 292 (mongod's
	// internalQueryMaxBlockingSortMemoryUsageBytes and
	// internalDocumentSourceGroupMaxMemoryBytes).
	DefaultStageBytes = 100 << 20
	// DefaultLookupBytes bounds the documents one $lookup gathers for one
	// input document (internalLookupStageIntermediateDocumentMaxSizeBytes);
	// past it the pipeline fails with 4568.
	DefaultLookupBytes = 100 << 20
)

// Error codes of the limits.
const (
	codeNoDiskUse     int32 = 292 // QueryExceededMemoryLimitNoDiskUseAllowed
	codeExceededLimit int32 = 146 // ExceededMemoryLimit
	codeLookupTooBig  int32 = 4568
)

// docOverhead is what holding one document costs beyond its bytes: a
// slice header and an allocation's rounding, roughly.
const docOverhead = 32

// Limits bounds the memory of one pipeline run. The zero value is
// mongod's defaults with disk use allowed, no server-wide budget, and
// spills in the system's temporary directory.
type Limits struct {
	// StageBytes is a blocking stage's in-memory limit; 0 means
	// DefaultStageBytes.
	StageBytes int64
	// LookupBytes bounds a $lookup's matches for one document; 0 means
	// DefaultLookupBytes.
	LookupBytes int64
	// NoDiskUse is allowDiskUse: false: a blocking stage past StageBytes
	// fails with 292 instead of spilling.
	NoDiskUse bool
	// TempDir is where spills go; "" is os.TempDir().
	TempDir string
	// Budget is shared by every query of a server; nil is none.
	Budget *Budget
}

func (l *Limits) stageBytes() int64 {
	if l.StageBytes > 0 {
		return l.StageBytes
	}
	return DefaultStageBytes
}

func (l *Limits) lookupBytes() int64 {
	if l.LookupBytes > 0 {
		return l.LookupBytes
	}
	return DefaultLookupBytes
}

// Budget is a server-wide bound on the memory its queries hold at once:
// the documents buffered by blocking stages, gathered by $lookup and
// built as results. A query whose reservation would pass it fails with
// 146 ExceededMemoryLimit; the others go on. It is safe for concurrent
// use.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes; max <= 0 is unlimited.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Max returns the budget's size in bytes (0: unlimited).
func (b *Budget) Max() int64 {
	if b == nil || b.max <= 0 {
		return 0
	}
	return b.max
}

// InUse returns the bytes reserved by running queries now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

func (b *Budget) reserve(n int64) error {
	if b == nil {
		return nil
	}
	if u := b.used.Add(n); b.max > 0 && u > b.max {
		b.used.Add(-n)
		return &mongoerr.Error{Code: codeExceededLimit, CodeName: "ExceededMemoryLimit",
			Message: fmt.Sprintf("query exceeded the server's memory budget for queries of %d bytes (tide serve --max-query-memory); %d bytes are in use by running queries", b.max, u-n)}
	}
	return nil
}

func (b *Budget) release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// memory is what one pipeline run holds against its Budget; the run
// releases all of it when it ends.
type memory struct {
	budget *Budget
	held   int64
}

func (m *memory) grow(n int64) error {
	if err := m.budget.reserve(n); err != nil {
		return err
	}
	m.held += n
	return nil
}

func (m *memory) shrink(n int64) {
	n = min(n, m.held)
	m.held -= n
	m.budget.release(n)
}

// errStageMemory is the error of a blocking stage past its limit that
// may not, or cannot, spill.
func errStageMemory(stage string, limit int64, noDisk bool) error {
	if noDisk {
		return &mongoerr.Error{Code: codeNoDiskUse, CodeName: "QueryExceededMemoryLimitNoDiskUseAllowed",
			Message: stage + " exceeded the memory limit of " + strconv.FormatInt(limit, 10) + " bytes, but did not opt in to external sorting or spilling. Pass allowDiskUse:true to opt in."}
	}
	return &mongoerr.Error{Code: codeNoDiskUse, CodeName: "QueryExceededMemoryLimitNoDiskUseAllowed",
		Message: stage + " exceeded the memory limit of " + strconv.FormatInt(limit, 10) + " bytes, and this server does not spill " + stage + " to disk"}
}

func errLookupTooBig(from string, limit int64) error {
	return mongoerr.New(codeLookupTooBig, "Total size of documents in %s matching pipeline's $lookup stage exceeds %d bytes", from, limit)
}
