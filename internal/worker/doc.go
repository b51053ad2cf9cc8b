// Package worker runs a group of tide workers that share pipelines through
// NATS JetStream key-value buckets, with no consensus of its own:
//
//   - tide_workers: one heartbeat key per live worker, expiring after the
//     lease TTL. Every worker watches the bucket, so all of them know the
//     same set of live workers.
//   - tide_leases: one key per running pipeline, naming its owner. A lease
//     is taken with create-if-absent, renewed by compare-and-set every TTL/3
//     and expires with the bucket's max age when its owner stops renewing.
//     A renewal that fails stops the pipeline at once.
//   - tide_pipelines: pipeline files stored by `tide pipeline put`, besides
//     (or instead of) a directory every worker reads.
//   - tide_status: a small record per pipeline, written by its owner every
//     few seconds, that `tide cluster status` reads.
//
// Every worker computes the same assignment of pipelines to live workers
// (balanced rendezvous hashing, see Assign), so they agree without a
// leader. A worker only acquires a lease that the assignment gives it, and
// gives back a pipeline the assignment moves elsewhere by draining it first
// and then deleting its lease, which the next owner's watch sees at once.
//
// The lease alone cannot stop a worker that was paused past its lease (a
// stall, SIGSTOP) from committing once more when it resumes: the new owner
// therefore fences the pipeline's checkpoint (Config.Build does it, before
// the sink opens), and the paused worker's next checkpoint save fails.
package worker
