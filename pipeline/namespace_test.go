package pipeline

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// nsRecorder is an obsRecorder that also counts records by namespace.
type nsRecorder struct {
	obsRecorder
	nsMu   sync.Mutex // guards the field below
	counts map[string]int
}

func (o *nsRecorder) CommittedNamespaces(counts []NamespaceCount) {
	o.nsMu.Lock()
	defer o.nsMu.Unlock()
	for _, c := range counts {
		o.counts[c.Namespace] += c.Records
	}
}

// TestNamespaceObserverCounts: a NamespaceObserver is told every committed
// record's namespace, markers excluded.
func TestNamespaceObserverCounts(t *testing.T) {
	log := &callLog{}
	evs := events(0, 250)
	want := map[string]int{}
	for i := range evs {
		evs[i].Namespace = fmt.Sprintf("db.c%d", (i/3)%40) // runs, and more namespaces than the linear search handles
		want[evs[i].Namespace]++
	}
	evs = append(evs, marker(250))
	src := newSource(log, evs)
	src.end = true
	obs := &nsRecorder{counts: map[string]int{}}
	p := New(Config{Name: "p", MaxRecords: 64, Logger: discard(), Observer: obs}, src, testEncode, newSink(log), newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(obs.counts) != fmt.Sprint(want) {
		t.Errorf("counts by namespace:\n got %v\nwant %v", obs.counts, want)
	}
}

func TestCountNamespaces(t *testing.T) {
	var recs []cdc.Record
	for _, ns := range []string{"a", "a", "b", "a", "c", "c", "b"} {
		recs = append(recs, cdc.Record{Event: cdc.Event{Namespace: ns}})
	}
	got := countNamespaces(recs)
	want := []NamespaceCount{{"a", 3}, {"b", 2}, {"c", 2}}
	if !slices.Equal(got, want) {
		t.Errorf("countNamespaces = %v, want %v", got, want)
	}
}
