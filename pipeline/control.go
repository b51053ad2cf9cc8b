package pipeline

import (
	"context"
	"fmt"
)

// control returns what the reader must obey, and a channel closed at the
// next change.
func (p *Pipeline) control() (pr *pause, draining bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pause, p.draining, p.changed
}

// broadcastLocked wakes every waiter on the current changed channel.
func (p *Pipeline) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// State returns where the pipeline is in its life.
func (p *Pipeline) State() State {
	p.mu.Lock()
	s := p.state
	p.mu.Unlock()
	if (s == Starting || s == Running) && p.degraded() {
		return Degraded
	}
	return s
}

// Stats returns a consistent snapshot of the pipeline's progress.
func (p *Pipeline) Stats() Stats {
	p.statsMu.Lock()
	st := p.stats
	p.statsMu.Unlock()
	p.lag(&st)
	return st
}

// Pause stops polling once the batch being read is closed, and returns once
// every batch read so far has committed. It returns ErrNotRunning if the
// pipeline stops first, and ctx.Err(), wrapped, if ctx is done first (the
// pipeline still pauses). Pausing a paused pipeline waits for the same
// pause. A Resume before the pause took effect lifts it, and Pause returns
// nil.
func (p *Pipeline) Pause(ctx context.Context) error {
	p.mu.Lock()
	if p.state == Stopped || p.state == Failed {
		p.mu.Unlock()
		return ErrNotRunning
	}
	if p.pause == nil {
		p.pause = &pause{reached: make(chan struct{})}
		p.broadcastLocked()
	}
	reached := p.pause.reached
	p.mu.Unlock()

	select {
	case <-reached:
		return nil
	default:
	}
	select {
	case <-reached:
		return nil
	case <-p.done:
		return ErrNotRunning
	case <-ctx.Done():
		return fmt.Errorf("pause: %w", ctx.Err())
	}
}

// pauseReached is called by the committer when it reaches the barrier the
// reader sent on pausing: every batch before it has committed.
func (p *Pipeline) pauseReached(pr *pause) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr.releaseLocked()
	if p.pause == pr && p.state == Running {
		p.state = Paused
		p.log.Info("pipeline paused")
	}
}

// Resume restarts polling after Pause. It does nothing if the pipeline is
// not paused.
func (p *Pipeline) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pause == nil {
		return
	}
	p.pause.releaseLocked() // a Pause still waiting returns
	p.pause = nil
	if p.state == Paused {
		p.state = Running
		p.log.Info("pipeline resumed")
	}
	p.broadcastLocked()
}

// Drain stops polling, commits what was read (one final bounded batch) and
// its checkpoint, closes the source and the sink, and waits for Run to
// return, like http.Server.Shutdown. It returns Run's result, or ctx.Err()
// wrapped if ctx is done first; the drain then goes on, and cancelling
// Run's context turns it into a hard stop. Draining a pipeline whose Run
// has not been called yet makes Run stop as soon as it has opened.
func (p *Pipeline) Drain(ctx context.Context) error {
	p.requestDrain()
	select {
	case <-p.done:
		return p.err
	default:
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("drain: %w", ctx.Err())
	}
}

// requestDrain tells the reader to stop. It never blocks, so a cleanup may
// call it.
func (p *Pipeline) requestDrain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		return
	}
	p.draining = true
	if p.stopOpening != nil {
		p.stopOpening() // nothing read yet: stop opening the ends
	}
	switch p.state {
	case Starting, Running, Paused:
		p.state = Draining
		p.log.Info("pipeline draining")
	}
	p.broadcastLocked()
}
