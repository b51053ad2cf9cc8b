package pipeline

// StatusDetailer is a Source with details of its own for a status page
// (the MongoDB source's oplog headroom). StatusDetails is called from
// another goroutine than Poll, about once a second; it must not block and
// must return a fresh map of JSON-encodable values.
type StatusDetailer interface {
	StatusDetails() map[string]any
}

// Err returns Run's result once Run has returned, and nil before: a status
// page shows why a pipeline failed without waiting for it.
func (p *Pipeline) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}
