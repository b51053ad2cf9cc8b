package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/checkpoint/natskv"
)

// The buckets of a worker group. Their names are part of the contract:
// `tide pipeline put` and `tide cluster status` use them too.
const (
	WorkersBucket   = "tide_workers"
	LeasesBucket    = "tide_leases"
	PipelinesBucket = "tide_pipelines"
	StatusBucket    = "tide_status"
)

// StatusMaxAge is how long a pipeline's status record outlives its last
// update: a pipeline nobody runs any more drops out of cluster status.
const StatusMaxAge = time.Minute

// Buckets are the key-value buckets of a worker group.
type Buckets struct {
	Workers, Leases, Pipelines, Status jetstream.KeyValue
}

// OpenBuckets opens the group's buckets, creating those that are absent
// with replicas copies (1 if replicas <= 0). The heartbeat and lease
// buckets expire keys after ttl, and mark each expiry so that watchers
// learn of it at once rather than at their next poll.
func OpenBuckets(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (*Buckets, error) {
	if replicas <= 0 {
		replicas = 1
	}
	marker := max(ttl, time.Second)
	open := func(cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
		cfg.Replicas = replicas
		return openBucket(ctx, js, cfg)
	}
	var b Buckets
	var err error
	if b.Workers, err = open(jetstream.KeyValueConfig{Bucket: WorkersBucket, TTL: ttl, LimitMarkerTTL: marker,
		Description: "tide: one heartbeat per live worker"}); err != nil {
		return nil, err
	}
	if b.Leases, err = open(jetstream.KeyValueConfig{Bucket: LeasesBucket, TTL: ttl, LimitMarkerTTL: marker,
		Description: "tide: the owner of each running pipeline"}); err != nil {
		return nil, err
	}
	if b.Pipelines, err = open(jetstream.KeyValueConfig{Bucket: PipelinesBucket,
		Description: "tide: pipeline files stored by tide pipeline put"}); err != nil {
		return nil, err
	}
	if b.Status, err = open(jetstream.KeyValueConfig{Bucket: StatusBucket, TTL: StatusMaxAge,
		Description: "tide: the status of each pipeline, written by its owner"}); err != nil {
		return nil, err
	}
	return &b, nil
}

// OpenPipelines opens the tide_pipelines bucket, creating it with
// replicas copies if it is absent.
func OpenPipelines(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return openBucket(ctx, js, jetstream.KeyValueConfig{Bucket: PipelinesBucket, Replicas: max(replicas, 1),
		Description: "tide: pipeline files stored by tide pipeline put"})
}

// bucketRetryFor bounds the retries of a bucket that a starting cluster
// cannot place yet.
const bucketRetryFor = 30 * time.Second

// openBucket creates the bucket cfg names, or opens it if another worker
// made it first (maybe with another TTL: it is used as it is, so that a
// group never fights over its config). A cluster that cannot place it
// yet (its servers have not all reported) is retried for a while.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	deadline := time.Now().Add(bucketRetryFor)
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		kv, err := js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
		if err == nil {
			return kv, nil
		}
		if !natskv.NoPeersYet(err) || time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("open bucket %s: %w (after %v)", cfg.Bucket, ctx.Err(), err)
		}
	}
}

// ValidKey reports whether name can be a key of the group's buckets,
// which is what a pipeline's name must be to run on workers.
func ValidKey(name string) bool {
	if name == "" || name[0] == '.' || name[len(name)-1] == '.' {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '=' || c == '.':
		default:
			return false
		}
	}
	return true
}
