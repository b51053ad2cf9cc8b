// Package cdctest checks that a source or a sink keeps the contract of
// package cdc, in the spirit of testing/fstest: a connector's own tests
// call TestSink or TestSource with a harness that tells the suite how to
// make the connector and how to look at its upstream or destination.
//
// The suite drives the connector the way package pipeline does (Load, Open,
// Put, State, Commit, Save, CheckpointSaved, Ack, Close) and checks what
// the pipeline relies on:
//
//   - a sink's records survive only through Commit: what was put and not
//     committed is gone after a reopen, and the batch, read again from the
//     source, is then committed once;
//   - a sink reopened from the checkpoint its State and Commit produced
//     goes on with no duplicate and no gap;
//   - Put does not retain the batch: the suite overwrites every byte of
//     the records after Put, and the committed bytes must be the originals;
//   - Commit with no Put works (a batch of markers only) and the
//     checkpoint it names is the one restored;
//   - Close can be called twice, and on a sink that never opened or
//     failed to;
//   - a source resumes exactly after a restored position, with no
//     duplicate and no gap, also after a restart that did not acknowledge
//     what it read past the position;
//   - a source refuses, with an error, a position it cannot seek to (bytes
//     that are not one of its positions) and one of another upstream
//     identity.
//
// A sink's test, where output(t) is the subtest's destination (see
// TestLineSink in this package's example_test.go for the whole of it):
//
//	func TestLineSink(t *testing.T) {
//		cdctest.TestSink(t, cdctest.SinkHarness{
//			New:       func(t *testing.T) cdc.Sink { return &lineSink{w: output(t)} },
//			Committed: func(t *testing.T) [][]byte { return lines(output(t)) },
//		})
//	}
//
// A sink that keeps the checkpoint itself gives the suite its store
// (SinkHarness.Checkpoints); a source's harness makes events upstream
// (SourceHarness.Produce).
//
// Each check is a subtest, so that a failure names the promise broken, and
// each subtest gets a destination or upstream of its own: the harness
// derives it from the *testing.T it is given. The suite's own tests prove
// that it fails on a sink that loses, duplicates or retains a record, and
// on a source that skips or repeats an event.
//
// # Stability
//
// Like the rest of Tide's public API before v1, this package may change.
package cdctest
