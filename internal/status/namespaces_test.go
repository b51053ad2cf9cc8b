package status

import (
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

// copying is a source in the middle of its snapshot of two collections.
type copying struct{ cdc.Source }

func (copying) SnapshotProgress() cdc.SnapshotProgress {
	return cdc.SnapshotProgress{Copying: true, Collections: []cdc.NamespaceProgress{
		{Namespace: "shop.customers", Done: 10, Total: 40}, {Namespace: "shop.orders", Done: 5, Total: 5}}}
}

// The namespace table counts the committed records of each namespace,
// bounded, and shows the snapshot progress of each collection the source
// copies, also of one with no change committed yet.
func TestNamespaceTable(t *testing.T) {
	tr := NewTracker()
	p := pipeline.New(pipeline.Config{Name: "ns"}, generate.New(generate.Config{}), encode.Envelope, brokenSink{}, nil)
	tr.Attach("ns", p, copying{}, nil)
	tr.CommittedNamespaces([]pipeline.NamespaceCount{{Namespace: "shop.orders", Records: 3}, {Namespace: "shop.items", Records: 1}})
	tr.CommittedNamespaces([]pipeline.NamespaceCount{{Namespace: "shop.orders", Records: 2}})
	got := tr.Status(time.Now(), false, 0).Namespaces
	if len(got) != 3 {
		t.Fatalf("namespaces %+v, want items, customers and orders", got)
	}
	items, customers, orders := got[1], got[0], got[2]
	if items.Namespace != "shop.items" || items.Events != 1 || items.LastChange == nil || items.Snapshot != nil {
		t.Errorf("items %+v", items)
	}
	if customers.Namespace != "shop.customers" || customers.Events != 0 || customers.LastChange != nil ||
		customers.Snapshot == nil || *customers.Snapshot != (NamespaceSnapshot{10, 40}) {
		t.Errorf("customers %+v: want no events yet and the snapshot at 10 of 40", customers)
	}
	if orders.Events != 5 || orders.Snapshot == nil || *orders.Snapshot != (NamespaceSnapshot{5, 5}) {
		t.Errorf("orders %+v", orders)
	}

	// Past maxNamespaces, the rest count together.
	big := NewTracker()
	counts := make([]pipeline.NamespaceCount, maxNamespaces+10)
	for i := range counts {
		counts[i] = pipeline.NamespaceCount{Namespace: "db.c" + string(rune('a'+i%26)) + time.Duration(i).String(), Records: 1}
	}
	big.CommittedNamespaces(counts)
	ns := big.Status(time.Now(), false, 0).Namespaces
	if len(ns) != maxNamespaces+1 {
		t.Fatalf("%d namespaces kept, want %d and %s", len(ns), maxNamespaces, otherNamespace)
	}
	for _, n := range ns {
		if n.Namespace == otherNamespace && n.Events != 10 {
			t.Errorf("%s holds %d records, want 10", otherNamespace, n.Events)
		}
	}
}
