package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/cdc"
)

// ErrFenced is wrapped by the error of a sink whose transactional id was
// taken over by another tide running the same pipeline (or by tide
// checkpoint set|reset): nothing it wrote after that becomes visible.
var ErrFenced = errors.New("kafka sink: fenced: another tide took over the pipeline's transactional id")

// errTopicMissing is the error of a topic that does not exist when the
// sink may not create it.
var errTopicMissing = errors.New("does not exist, and create_topics is false")

// A RecordError is a record the cluster refused for good (not authorized
// on its topic, too large, its topic missing with create_topics off), so
// that it can be routed elsewhere (a dead-letter topic) by its index and
// key. Transient failures that outlasted max_outage are not RecordErrors.
type RecordError struct {
	// Index is the record's index in the batch Put was given.
	Index int
	Topic string
	Key   []byte // nil when the record has none
	Pos   cdc.Position
	Err   error
}

func (e *RecordError) Error() string {
	key := "null"
	if e.Key != nil {
		key = string(e.Key)
	}
	return fmt.Sprintf("kafka sink: record at %s refused for good (topic %q, key %s): %v", e.Pos, e.Topic, key, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// permanent reports whether err, a record's produce error, is one that no
// retry can fix.
func permanent(err error) bool {
	for _, p := range []error{
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed,
		kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.InvalidTopicException,
		kerr.UnknownTopicOrPartition, kerr.CorruptMessage, kerr.UnsupportedCompressionType,
		kerr.PolicyViolation, kerr.InvalidRequiredAcks,
	} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// abortable reports whether err, a produce error in a transaction, is
// one that aborting the transaction and writing its records again in a
// new one can clear: the broker lost or refused the producer's sequence
// (which ends the transaction, not the producer), or asked for the abort.
func abortable(err error) bool {
	var re *RecordError
	if errors.As(err, &re) || errors.Is(err, ErrFenced) {
		return false // refused for its content, or another tide owns the id
	}
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.TransactionAbortable)
}

// fenced reports whether err says that another producer took over the
// transactional id.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidProducerIDMapping)
}

// explain says what a produce error means for the pipeline.
func explain(err error, maxOutage string) error {
	if errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) {
		return fmt.Errorf("the cluster did not take the record within max_outage (%s): %w", maxOutage, err)
	}
	return err
}
