// Package metrics exposes a pipeline's progress as Prometheus metrics. It
// implements pipeline.Observer and pipeline.NamespaceObserver, so the
// runtime stays free of Prometheus. Every command serves its registry on
// the status server (package internal/status), which applies one rule to
// every address it binds.
package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/pipeline"
)

// Pipeline holds the metrics of one pipeline. Its methods are safe for
// concurrent use.
type Pipeline struct {
	eventsIn      prometheus.Counter
	bytesIn       prometheus.Counter
	eventsOut     *prometheus.CounterVec // by namespace
	bytesOut      prometheus.Counter
	batches       prometheus.Counter
	commitLatency prometheus.Histogram
	errors        *prometheus.CounterVec
	retries       *prometheus.CounterVec // by component: source, sink

	created    time.Time
	lastCommit atomic.Int64 // Unix nanoseconds of the last checkpoint; 0 before the first
	watched    atomic.Pointer[Watched]

	mu         sync.Mutex                    // guards the field below
	namespaces map[string]prometheus.Counter // the namespace label values in use, at most MaxNamespaces
	other      prometheus.Counter
}

// MaxNamespaces bounds the values of the namespace label of
// tide_events_out_total: past that many, records of other namespaces
// count under OtherNamespace, so that a source with a great many
// collections (or NATS subjects) cannot grow the series without bound.
const MaxNamespaces = 1000

// OtherNamespace is the namespace label of the records past MaxNamespaces.
const OtherNamespace = "_other"

// New registers the metrics of the named pipeline with reg.
func New(reg prometheus.Registerer, pipeline string) *Pipeline {
	labels := prometheus.Labels{"pipeline": pipeline}
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tide", Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	m := &Pipeline{
		eventsIn: f("events_in_total", "Events handed out by the source, markers included."),
		bytesIn:  f("bytes_in_total", "In-memory bytes of the events handed out by the source."),
		eventsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tide", Name: "events_out_total", ConstLabels: labels,
			Help: "Events committed by the sink, by namespace (db.collection, or the NATS subject; " +
				"past " + strconv.Itoa(MaxNamespaces) + " namespaces the rest count as " + OtherNamespace + ").",
		}, []string{"namespace"}),
		bytesOut: f("bytes_out_total", "Encoded bytes committed by the sink."),
		batches:  f("batches_total", "Batches committed and checkpointed."),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "tide", Name: "commit_latency_seconds", ConstLabels: labels,
			Help:    "Time from the first put of a batch to its saved checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tide", Name: "errors_total", ConstLabels: labels,
			Help: "Errors by pipeline stage (poll, encode, put, commit, save, ack, close).",
		}, []string{"stage"}),
	}
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tide", Name: "retries_total", ConstLabels: labels,
		Help: "Transient errors the source or the sink retried, by component (source, sink).",
	}, []string{"component"})
	m.created = time.Now()
	reg.MustRegister(m.commitLatency, m.errors, m.eventsOut, m.retries, newHealthCollector(m, labels))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "tide", Name: "checkpoint_age_seconds", ConstLabels: labels,
		Help: "Seconds since the last saved checkpoint; before the first, since the pipeline was created.",
	}, m.checkpointAge))
	return m
}

// checkpointAge grows from the pipeline's creation until the first
// checkpoint: a pipeline that never saves one must not look fresh.
func (m *Pipeline) checkpointAge() float64 {
	last := m.lastCommit.Load()
	if last == 0 {
		return time.Since(m.created).Seconds()
	}
	return time.Since(time.Unix(0, last)).Seconds()
}

// Polled counts events handed out by the source.
func (m *Pipeline) Polled(n, bytes int) {
	m.eventsIn.Add(float64(n))
	m.bytesIn.Add(float64(bytes))
}

// Committed counts one committed and checkpointed batch. Its records are
// counted by CommittedNamespaces, which the runtime calls next.
func (m *Pipeline) Committed(n, bytes int, took time.Duration, _ cdc.Checkpoint) {
	m.bytesOut.Add(float64(bytes))
	m.batches.Inc()
	m.commitLatency.Observe(took.Seconds())
	m.lastCommit.Store(time.Now().UnixNano())
}

// CommittedNamespaces counts a committed batch's records by namespace.
func (m *Pipeline) CommittedNamespaces(counts []pipeline.NamespaceCount) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range counts {
		m.namespaceLocked(c.Namespace).Add(float64(c.Records))
	}
}

// namespaceLocked returns the counter of ns, or of OtherNamespace once
// MaxNamespaces are in use.
func (m *Pipeline) namespaceLocked(ns string) prometheus.Counter {
	if c, ok := m.namespaces[ns]; ok {
		return c
	}
	if len(m.namespaces) >= MaxNamespaces || ns == OtherNamespace {
		if m.other == nil {
			m.other = m.eventsOut.WithLabelValues(OtherNamespace)
		}
		return m.other
	}
	if m.namespaces == nil {
		m.namespaces = make(map[string]prometheus.Counter)
	}
	c := m.eventsOut.WithLabelValues(ns)
	m.namespaces[ns] = c
	return c
}

// Failed counts an error at a pipeline stage.
func (m *Pipeline) Failed(stage string, _ error) {
	m.errors.WithLabelValues(stage).Inc()
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
