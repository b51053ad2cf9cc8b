// Package kafka is the Kafka sink: it writes each record to a Kafka topic
// through franz-go, one topic per namespace by a template
// (Config.Topic), keyed as Debezium's MongoDB connector keys its records
// ({"id": "<_id as strict JSON>"}) and partitioned by the Java client's
// murmur2 partitioner, with tide-* headers, and after a delete a
// tombstone when the format is debezium.
//
// # Guarantees
//
// The producer is idempotent and waits for acks from all in-sync
// replicas, with at most five requests in flight per broker, which the
// idempotent producer keeps in order: retries never reorder a partition.
// Put produces at once; Commit returns only when every record is
// acknowledged, so the pipeline saves a checkpoint only then:
// at-least-once.
//
// Sink.Checkpoints (checkpoint: sink) makes it exactly-once for
// read_committed consumers: each batch's records and its checkpoint, a
// record keyed by the pipeline's name in the compacted
// Config.CheckpointTopic, are written in one Kafka transaction. Its
// transactional id is TransactionalID(pipeline), and Checkpoints.Load
// takes it over before it reads the checkpoint topic to its end: the
// cluster fences any earlier producer of the pipeline (its commit fails,
// ErrFenced, and nothing of it becomes visible) and aborts the
// transaction a killed one left open. A commit whose outcome is unknown
// is settled by taking the id over again and reading the checkpoint
// back: a batch that committed is never written twice, and one whose
// transaction aborted is written again, whole, in a new transaction, for
// up to Config.MaxOutage.
//
// # Failures
//
// A record the cluster refuses for good (topic authorization, too large,
// topic missing with CreateTopics off) fails the batch at once with a
// *RecordError naming its topic, key and index. Transient failures are
// retried by the client until Config.MaxOutage passes without an
// acknowledgement. Errors and logs never hold the SASL password.
package kafka
