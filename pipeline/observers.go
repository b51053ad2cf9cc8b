package pipeline

import (
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// Observers sends every observation to each of its members, in order: a
// pipeline has one Observer, and metrics and a status page both want to
// see it. Members that are NamespaceObservers get the per-namespace
// counts too.
type Observers []Observer

func (o Observers) Polled(n, bytes int) {
	for _, x := range o {
		x.Polled(n, bytes)
	}
}

func (o Observers) Committed(n, bytes int, took time.Duration, cp cdc.Checkpoint) {
	for _, x := range o {
		x.Committed(n, bytes, took, cp)
	}
}

func (o Observers) CommittedNamespaces(counts []NamespaceCount) {
	for _, x := range o {
		if n, ok := x.(NamespaceObserver); ok {
			n.CommittedNamespaces(counts)
		}
	}
}

func (o Observers) Failed(stage string, err error) {
	for _, x := range o {
		x.Failed(stage, err)
	}
}

func (o Observers) SetAside(stage string, deadLetter bool) {
	for _, x := range o {
		if d, ok := x.(DeadLetterObserver); ok {
			d.SetAside(stage, deadLetter)
		}
	}
}

func (o Observers) Retrying(component string, attempt int, err error) {
	for _, x := range o {
		if r, ok := x.(RetryObserver); ok {
			r.Retrying(component, attempt, err)
		}
	}
}
