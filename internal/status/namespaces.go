package status

import (
	"slices"
	"strings"
	"time"

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
	Namespace  string    `json:"namespace"`
	Events     int64     `json:"events"`
	LastChange time.Time `json:"last_change"`
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

// namespacesLocked returns the namespaces in name order.
func (t *Tracker) namespacesLocked() []NamespaceStatus {
	out := make([]NamespaceStatus, 0, len(t.ns))
	for name, n := range t.ns {
		out = append(out, NamespaceStatus{Namespace: name, Events: n.events, LastChange: n.last})
	}
	slices.SortFunc(out, func(a, b NamespaceStatus) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}
