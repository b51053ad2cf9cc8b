package pipeline

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
