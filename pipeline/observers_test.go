package pipeline

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// recordingObserver notes every call, namespaces included.
type recordingObserver struct{ calls []string }

func (r *recordingObserver) Polled(n, _ int) { r.calls = append(r.calls, "polled") }
func (r *recordingObserver) Committed(n, _ int, _ time.Duration, _ cdc.Checkpoint) {
	r.calls = append(r.calls, "committed")
}
func (r *recordingObserver) Failed(stage string, _ error) { r.calls = append(r.calls, "failed "+stage) }

type namespaceRecorder struct{ recordingObserver }

func (r *namespaceRecorder) CommittedNamespaces(c []NamespaceCount) {
	r.calls = append(r.calls, "namespaces "+c[0].Namespace)
}

// TestObserversFanOut: every member sees every call, in order; only
// NamespaceObservers get the per-namespace counts.
func TestObserversFanOut(t *testing.T) {
	plain, ns := &recordingObserver{}, &namespaceRecorder{}
	o := Observers{plain, ns}
	o.Polled(1, 10)
	o.Committed(1, 10, time.Millisecond, cdc.Checkpoint{})
	o.CommittedNamespaces([]NamespaceCount{{Namespace: "d.c", Records: 1}})
	o.Failed("put", errors.New("x"))
	if want := []string{"polled", "committed", "failed put"}; !slices.Equal(plain.calls, want) {
		t.Errorf("plain observer saw %q, want %q", plain.calls, want)
	}
	if want := []string{"polled", "committed", "namespaces d.c", "failed put"}; !slices.Equal(ns.calls, want) {
		t.Errorf("namespace observer saw %q, want %q", ns.calls, want)
	}
}
