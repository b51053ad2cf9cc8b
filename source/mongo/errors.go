package mongo

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"

	"github.com/tide-cdc/tide/cdc"
)

// Sentinels. Errors from Open and Poll wrap them, with details.
var (
	// ErrIdentity: the checkpoint was written for another deployment,
	// collection or stream configuration.
	ErrIdentity = errors.New("mongosource: checkpoint does not match the source")
	// ErrHistoryLost: the checkpoint's position is no longer in the oplog.
	ErrHistoryLost = errors.New("mongosource: change history lost")
	// ErrEventTooLarge: one event is larger than max_buffered_bytes.
	ErrEventTooLarge = errors.New("mongosource: event larger than the buffer")
	// ErrNotAdmitted: the deployment or the collection cannot be streamed.
	ErrNotAdmitted = errors.New("mongosource: source not admitted")
	// ErrInvalidated: the collection was dropped or renamed, or its
	// database dropped, and the change stream ended with an invalidate.
	// Errors wrapping it also wrap cdc.ErrEnd, so that the runtime
	// delivers every event up to the invalidate before it stops.
	ErrInvalidated = errors.New("mongosource: change stream invalidated")
)

// invalidatedError is how the stream ends after an invalidate: not a
// clean end, since the pipeline cannot go on, but one after which every
// event read is still delivered.
type invalidatedError struct{ msg string }

func (e *invalidatedError) Error() string   { return e.msg }
func (e *invalidatedError) Unwrap() []error { return []error{ErrInvalidated, cdc.ErrEnd} }

// invalidated says what ended the stream on ns: cause is the event that
// came before the invalidate (drop, rename, dropDatabase), and renamedTo
// the new namespace after a rename.
func invalidated(ns string, cause cdc.Op, renamedTo string) error {
	var what, todo string
	switch cause {
	case cdc.OpRename:
		what = "the collection was renamed"
		if renamedTo != "" {
			what += " to " + renamedTo
		}
		todo = "to follow it, point the pipeline's collection at the new name"
	case cdc.OpDropDatabase:
		what = "its database was dropped"
		todo = "to stream a collection of that name created later"
	case cdc.OpDrop:
		what = "the collection was dropped"
		todo = "to stream a collection of that name created later"
	default:
		cause, what = "unknown", "the collection was dropped or renamed"
		todo = "to stream it again"
	}
	return &invalidatedError{fmt.Sprintf("%v on %s after a %s event: %s; every change up to the invalidate is delivered "+
		"and the pipeline stops; %s, reset the checkpoint (tide checkpoint reset -f FILE --yes) "+
		"and move a file sink's output aside first, as a fresh start refuses a non-empty file",
		ErrInvalidated, ns, cause, what, todo)}
}

// resetHint tells the user how to start over from a fresh checkpoint.
const resetHint = "to start over from now (with a new snapshot if snapshot is initial), reset the checkpoint: tide checkpoint reset -f FILE --yes"

// recoverHint names the two recovery commands for lost history, and the
// destructive way out.
const recoverHint = "to recover, re-snapshot: tide snapshot -f FILE (the next run copies the collection(s) again into the same output, " +
	"frames the copy with snapshot lines, and streams on from there); or, accepting that the changes in between are lost, " +
	"resume from a time inside the oplog window: tide checkpoint set -f FILE --cluster-time T; or start over: tide checkpoint reset -f FILE --yes"

// resnapshotOutputHint says what to do with what a sink already holds
// before starting over: a file sink refuses a fresh start into a
// non-empty file, and the new snapshot copies every document again.
const resnapshotOutputHint = "before a reset, move a file sink's existing output aside (or delete it): " +
	"a fresh start refuses a non-empty file, and the new snapshot writes every document again; " +
	"other sinks receive the snapshot's documents again"

// Server error codes this package tells apart.
const (
	codeUnauthorized           = 13
	codeAuthenticationFailed   = 18
	codeNamespaceNotFound      = 26
	codeCursorNotFound         = 43
	codeNoMatchingDocument     = 47
	codeInvalidResumeToken     = 260
	codeChangeStreamFatal      = 280
	codeChangeStreamHistory    = 286
	codeBSONObjectTooLarge     = 10334
	codeStandaloneChangeStream = 40573
)

// permanentCodes are server errors that retrying cannot fix.
var permanentCodes = []int{
	2, 9, 14, 20, 72, 73, 40324, 40415, 40602, 50865, // bad command or pipeline
	codeUnauthorized, codeAuthenticationFailed, codeNamespaceNotFound, codeNoMatchingDocument,
	codeInvalidResumeToken, codeChangeStreamFatal, codeChangeStreamHistory,
	codeBSONObjectTooLarge, codeStandaloneChangeStream,
}

// transient reports whether err may go away by retrying: network errors,
// timeouts, server selection, cursors lost, and server errors labelled
// resumable or retryable. Everything else is permanent.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var pe *permanentError
	var ae *auth.Error
	if errors.As(err, &pe) || errors.As(err, &ae) || errors.Is(err, ErrNotAdmitted) || errors.Is(err, ErrIdentity) {
		return false
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		if se.HasErrorLabel("NonResumableChangeStreamError") {
			return false
		}
		for _, c := range permanentCodes {
			if se.HasErrorCode(c) {
				return false
			}
		}
		return se.HasErrorLabel("ResumableChangeStreamError") || se.HasErrorLabel("RetryableError") ||
			se.HasErrorLabel("RetryableWriteError") || se.HasErrorLabel("NetworkError") ||
			se.HasErrorCode(codeCursorNotFound) || resumableCode(se)
	}
	// Not a server error: a network failure, a timeout, no server
	// selectable, a cursor closed under us.
	return true
}

// resumableCode is the drivers' allow-list for servers before wire 9.
func resumableCode(se mongo.ServerError) bool {
	for _, c := range []int{6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 13388, 234, 133} {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

// explain turns a permanent stream error into one that says what to do.
// split says whether the stream has $changeStreamSplitLargeEvent.
func explain(ns string, split bool, err error) error {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.HasErrorCode(codeChangeStreamHistory):
		return fmt.Errorf("%w on %s: the checkpoint's position is older than the oldest oplog entry "+
			"(the pipeline was stopped longer than the oplog window); nothing was skipped and the checkpoint is unchanged; "+
			"%s (and consider a larger oplog); %s: %v", ErrHistoryLost, ns, recoverHint, resnapshotOutputHint, err)
	case se.HasErrorCode(codeChangeStreamFatal):
		return fmt.Errorf("%w on %s: the server cannot resume from the checkpoint's token "+
			"(not found in the oplog, or the pipeline changed or removed _id); the checkpoint is unchanged; "+
			"%s; %s: %v", ErrHistoryLost, ns, recoverHint, resnapshotOutputHint, err)
	case se.HasErrorCode(codeUnauthorized):
		return fmt.Errorf("change stream on %s: not authorized: grant the user the read role on the database "+
			"and clusterMonitor (for replSetGetConfig): %w", ns, err)
	case se.HasErrorCode(codeAuthenticationFailed):
		return fmt.Errorf("change stream on %s: authentication failed: check the user name, password and authSource in the uri: %w", ns, err)
	case se.HasErrorCode(codeNoMatchingDocument):
		return fmt.Errorf("change stream on %s: a required pre- or post-image is missing (expired or recorded before images were enabled); "+
			"use when_available, or %s: %w", ns, resetHint, err)
	case se.HasErrorCode(codeBSONObjectTooLarge):
		return tooLarge(ns, split, err)
	}
	return err
}

// maxEventBytes is the size limit of a change event, MongoDB's
// maxBsonObjectSize.
const maxEventBytes = 16 << 20

// Parts of a BSONObjectTooLarge message: the size of the whole event
// ("BSONObj size: 16777300 (0x...) is invalid"), or of the one field too
// large for a fragment ("field 'fullDocument' alone is 16777052 bytes"),
// and the event's resume token (`_id: {_data: "82..."}`).
var (
	tooLargeSize  = regexp.MustCompile(`BSONObj size: ([0-9]+)`)
	tooLargeField = regexp.MustCompile(`field '([^']+)' alone is ([0-9]+) bytes`)
	tooLargeToken = regexp.MustCompile(`_data"?\s*:\s*"([0-9A-Fa-f]+)"`)
)

// tooLarge explains a change event the server cannot send: its size, as
// far as the server's message tells it, against the 16 MiB limit, and how
// to step past it with tide checkpoint set, naming the event's resume
// token and cluster time when the message has them.
func tooLarge(ns string, split bool, err error) error {
	msg := err.Error()
	what := "a change event"
	data := ""
	if m := tooLargeToken.FindStringSubmatch(msg); m != nil {
		data = m[1]
		what += fmt.Sprintf(` (resume token {"_data":"%s"}`, data)
		if ts, ok := tokenTime(data); ok {
			what += fmt.Sprintf(", cluster time Timestamp(%d, %d)", ts.T, ts.I)
		}
		what += ")"
	}
	limit := fmt.Sprintf("the %d-byte (16 MiB) limit of a change event", maxEventBytes)
	var why, fix string
	switch m, f := tooLargeSize.FindStringSubmatch(msg), tooLargeField.FindStringSubmatch(msg); {
	case f != nil:
		why = fmt.Sprintf("%s is over %s, and its field %s alone is %s, too large for one fragment beside the event's _id, "+
			"so the server cannot split it", what, limit, f[1], sizeText(f[2]))
	case m != nil:
		why = fmt.Sprintf("%s is %s, over %s", what, sizeText(m[1]), limit)
	default:
		why = fmt.Sprintf("%s is over %s", what, limit)
	}
	if !split {
		why += " and the server cannot split it (it has no $changeStreamSplitLargeEvent, which MongoDB 7.0, or 6.0.9 and later, has)"
		fix = "upgrade the server; or "
	}
	step := "tide checkpoint set -f FILE --cluster-time T, with T the event's cluster time"
	if data != "" {
		step = fmt.Sprintf(`tide checkpoint set -f FILE --resume-token '{"_data":"%s"}' (resumes right after this event)`, data)
		if ts, ok := tokenTime(data); ok {
			step += fmt.Sprintf(" or --cluster-time %d.%d (after every change of its cluster time, the rest of its transaction included)", ts.T, ts.I)
		}
	}
	fix += "step past it, which leaves that change out of the output: " + step +
		"; or, if full_document or before_change make it that large, drop them (which changes the stream, so the checkpoint must be reset: " +
		"tide checkpoint reset -f FILE --yes)"
	return fmt.Errorf("change stream on %s: %s; nothing after it can be read, and the checkpoint stays before it; %s: %w", ns, why, fix, err)
}

// sizeText is a decimal byte count in bytes and in MiB, cut (not
// rounded) to two places, so that a size just under 16 MiB does not read
// as 16.
func sizeText(n string) string {
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return n + " bytes"
	}
	return fmt.Sprintf("%d bytes (%.2f MiB)", v, math.Floor(float64(v)*100/(1<<20))/100)
}
