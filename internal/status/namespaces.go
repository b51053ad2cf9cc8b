package status

import (
	"slices"
	"strings"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// maxNamespaces bounds the namespaces a Tracker keeps: past that many,
// the others count together under OtherNamespace, as in /metrics.
const maxNamespaces = 1000

// otherNamespace holds the records of namespaces past maxNamespaces.
const otherNamespace = "_other"

// nsCount is what a Tracker keeps of one namespace.
type nsCount struct {
	events int64
	last   time.Time // when its last record was committed
}

// NamespaceStatus is one namespace in /api/status: the records committed
// and when the last of them was.
type NamespaceStatus struct {
	Namespace  string     `json:"namespace"`
	Events     int64      `json:"events"`
	LastChange *time.Time `json:"last_change"` // null before its first
	// Snapshot is the namespace's initial copy (cdc.SnapshotReporter),
	// while the source reports one.
	Snapshot *NamespaceSnapshot `json:"snapshot,omitempty"`
}

// NamespaceSnapshot is how far a namespace's snapshot is: documents
// copied and the estimated total.
type NamespaceSnapshot struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// CommittedNamespaces implements pipeline.NamespaceObserver: the status
// page's table of namespaces.
func (t *Tracker) CommittedNamespaces(counts []pipeline.NamespaceCount) {
	now := time.Now().UTC()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ns == nil {
		t.ns = map[string]*nsCount{}
	}
	for _, c := range counts {
		n := t.ns[c.Namespace]
		if n == nil {
			key := c.Namespace
			if len(t.ns) >= maxNamespaces {
				key = otherNamespace
			}
			if n = t.ns[key]; n == nil {
				n = &nsCount{}
				t.ns[key] = n
			}
		}
		n.events += int64(c.Records)
		n.last = now
	}
}

// namespacesLocked returns the namespaces in name order, with the
// snapshot progress of each collection the source copies.
func (t *Tracker) namespacesLocked(snap []cdc.NamespaceProgress) []NamespaceStatus {
	out := make([]NamespaceStatus, 0, len(t.ns))
	index := make(map[string]int, len(t.ns))
	for name, n := range t.ns {
		last := n.last
		index[name] = len(out)
		out = append(out, NamespaceStatus{Namespace: name, Events: n.events, LastChange: &last})
	}
	for _, c := range snap {
		i, ok := index[c.Namespace]
		if !ok {
			i = len(out)
			out = append(out, NamespaceStatus{Namespace: c.Namespace})
		}
		out[i].Snapshot = &NamespaceSnapshot{Done: c.Done, Total: c.Total}
	}
	slices.SortFunc(out, func(a, b NamespaceStatus) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}
