package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// commitSplit commits a batch whose Commit the sink refused because of a
// record it will never take (an error wrapping cdc.ErrRefused), with
// on_error skip or dead_letter. It halves the batch until the refused
// records stand alone, commits every other record in order, each part
// with the checkpoint of its last record (the last part with next), and
// sets each refused record aside (stage "sink"). dead are the batch's
// encode-stage dead letters, which a cdc.DeadLetterSink keeps in the
// first part that commits. It returns the checkpoint to save: next, with
// the sink's state after the last part.
func (p *Pipeline) commitSplit(ctx context.Context, recs []cdc.Record, dead []cdc.DeadLetter, next cdc.Checkpoint) (cdc.Checkpoint, error) {
	dls, _ := p.sink.(cdc.DeadLetterSink)
	if p.cfg.OnError != OnErrorDeadLetter {
		dls = nil
	}
	var carry []cdc.DeadLetter // for dls, until a part commits
	if dls != nil {
		carry = dead
	}
	// commit puts part (which may be empty) and letters, and commits
	// with the checkpoint at pos, or next when final.
	commit := func(part []cdc.Record, letters []cdc.DeadLetter, pos cdc.Position, final bool) error {
		cp := next
		if !final {
			cp.Source = pos
		}
		if len(part) > 0 {
			if err := p.sink.Put(ctx, part); err != nil {
				return fmt.Errorf("put %d records: %w", len(part), err)
			}
		}
		if st, ok := p.sink.(cdc.Stater); ok {
			cp.Sink = st.State()
		}
		if all := append(carry[:len(carry):len(carry)], letters...); dls != nil && len(all) > 0 {
			if err := dls.PutDeadLetters(ctx, all); err != nil {
				return fmt.Errorf("put %d dead letters: %w", len(all), err)
			}
		}
		if err := p.sink.Commit(ctx, cp); err != nil {
			return err
		}
		carry = nil
		next.Sink = cp.Sink
		return nil
	}
	var try func(part []cdc.Record, final bool) error
	try = func(part []cdc.Record, final bool) error {
		if len(part) == 0 {
			return nil
		}
		last := part[len(part)-1].Pos
		err := commit(part, nil, last, final)
		if err == nil || !errors.Is(err, cdc.ErrRefused) || ctx.Err() != nil {
			return err
		}
		if len(part) > 1 {
			half := len(part) / 2
			if err := try(part[:half], false); err != nil {
				return err
			}
			return try(part[half:], final)
		}
		// The refused record, alone: set aside, its position still moving
		// the checkpoint (with its letter, where the sink keeps them).
		l := cdc.DeadLetter{Event: part[0].Event, Stage: "sink", Err: err.Error(), Time: time.Now()}
		if err := p.setAside(ctx, []cdc.DeadLetter{l}); err != nil {
			return err
		}
		var letters []cdc.DeadLetter
		if dls != nil {
			letters = []cdc.DeadLetter{l}
		}
		return commit(nil, letters, last, final)
	}
	if err := try(recs, true); err != nil {
		p.failed(ctx, "commit", err)
		return cdc.Checkpoint{}, fmt.Errorf("commit %d records, split to set aside what the sink refused: %w", len(recs), err)
	}
	return next, nil
}
