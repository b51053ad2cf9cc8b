package mongowire

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Query memory. A query runs as a stream (internal/mql): what it holds at
// once is what its blocking stages buffer, what a $lookup gathers for one
// document, and the result it builds for the cursor. Each blocking stage
// is held to Config.StageMemoryLimit and spills to disk past it (or fails
// with 292 under allowDiskUse: false), each $lookup to
// Config.LookupMemoryLimit (4568), and all queries together to the
// server's budget, Config.MaxQueryMemory (146). Every reply document is
// at most 16 MiB (10334, cursor.go).

// DefaultMaxQueryMemory returns the default server-wide budget for query
// memory: a quarter of the machine's physical memory (or of the cgroup's
// limit, if lower), or 1 GiB when neither can be read.
func DefaultMaxQueryMemory() int64 {
	total := physicalMemory()
	if total <= 0 {
		return 1 << 30
	}
	return total / 4
}

// physicalMemory returns the memory this process may use, in bytes: the
// smaller of MemTotal in /proc/meminfo and the cgroup v2 or v1 limit; 0
// if unknown.
func physicalMemory() int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					total = kb << 10
				}
				break
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

func newQueryBudget(max int64) *mql.Budget {
	switch {
	case max == 0:
		max = DefaultMaxQueryMemory()
	case max < 0:
		max = 0 // unlimited
	}
	return mql.NewBudget(max)
}

// spillDir is where blocking stages spill: DataDir/_tmp, as mongod's
// dbpath/_tmp, or "" (the system's temporary directory).
func (s *Server) spillDir() string {
	if s.cfg.DataDir == "" {
		return ""
	}
	return filepath.Join(s.cfg.DataDir, "_tmp")
}

// clearSpillDir empties the spill directory at Start: what a crashed run
// left there is of no use.
func (s *Server) clearSpillDir() error {
	dir := s.spillDir()
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// queryLimits returns the memory limits of query command r: the server's,
// and its allowDiskUse (default true, as mongod's allowDiskUseByDefault).
func (s *Server) queryLimits(r *request) (mql.Limits, error) {
	lim := mql.Limits{
		StageBytes:  s.cfg.StageMemoryLimit,
		LookupBytes: s.cfg.LookupMemoryLimit,
		TempDir:     s.spillDir(),
		Budget:      s.queryBudget,
	}
	if v, err := r.cmd.LookupErr("allowDiskUse"); err == nil && v.Type != bson.TypeNull {
		a := newArgs(r)
		lim.NoDiskUse = !a.bool("allowDiskUse")
		return lim, a.err
	}
	return lim, nil
}
