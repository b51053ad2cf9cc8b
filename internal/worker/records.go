package worker

import "time"

// WorkerRecord is a worker's heartbeat, the value of its key in
// tide_workers.
type WorkerRecord struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	Since     time.Time `json:"since"`
	Pipelines []string  `json:"pipelines"`
	Updated   time.Time `json:"updated"`
}

// LeaseRecord is the value of a pipeline's key in tide_leases.
type LeaseRecord struct {
	Worker   string    `json:"worker"`
	Host     string    `json:"host"`
	Acquired time.Time `json:"acquired"`
}

// StatusRecord is the value of a pipeline's key in tide_status.
type StatusRecord struct {
	Pipeline       string    `json:"pipeline"`
	Owner          string    `json:"owner"`
	State          string    `json:"state"` // starting, running, done (a finite source ended), failed, waiting (to open again)
	EventsOut      int64     `json:"events_out"`
	EventsPerSec   float64   `json:"events_per_sec"`
	Lag            string    `json:"lag,omitempty"` // as the source measures it: a duration, or pending messages
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
	Error          string    `json:"error,omitempty"`
	Updated        time.Time `json:"updated"`
}
