// Package natskv keeps pipeline checkpoints in a NATS JetStream key-value
// bucket, so that any worker of a group can resume a pipeline where
// another one left it, and a cluster of NATS servers replicates them (a
// bucket of 3 replicas survives the loss of one server).
//
// A checkpoint is the same versioned, checksummed record as in a data
// directory (package checkpoint), under the key of the pipeline's name.
// Every Save is a compare-and-set on the revision the Store last read or
// wrote for that key: a Store whose view is stale, because another Store
// fenced the key (Fence) or saved since, is refused with ErrNotOwner and
// can never overwrite a newer checkpoint. That refusal is final for the
// Store's pipeline; the runtime stops it.
//
// A record of generation 0 is a claim written by Fence before the pipeline
// ever saved: it records the owner and Load returns no checkpoint for it.
// Saves number their records from 1.
package natskv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
)

// DefaultBucket is the bucket a zero Config uses.
const DefaultBucket = "tide_checkpoints"

// DefaultRetryFor is how long a Save, Load or Fence retries while NATS
// does not answer (a server restarting, a stream leader being elected).
const DefaultRetryFor = 30 * time.Second

// MaxReplicas is the most replicas a JetStream stream can have.
const MaxReplicas = 5

// Config configures a Store.
type Config struct {
	Bucket string // default "tide_checkpoints"
	// Replicas is the bucket's replica count when Open creates it
	// (default 1, at most 5). An existing bucket with fewer replicas is
	// refused rather than silently used with less redundancy.
	Replicas int
	// RetryFor bounds how long an operation retries while NATS does not
	// answer; default DefaultRetryFor. A refusal (ErrNotOwner) is never
	// retried.
	RetryFor time.Duration
}

// ErrNotOwner is wrapped by the error of a Save refused because the key
// changed since this Store last saw it: another owner took the pipeline.
var ErrNotOwner = errors.New("natskv: this store is no longer the pipeline's owner")

// NotOwnerError is a refused Save. It wraps ErrNotOwner.
type NotOwnerError struct {
	Pipeline string
	Bucket   string
	Key      string
	Expected uint64 // the revision this Store last saw (0: none)
	Revision uint64 // the key's revision now (0: no record)
	Owner    string // the owner the current record names, if any
	Claim    string // for a refused Load: the owner this Store fenced the key for
}

func (e *NotOwnerError) Error() string {
	owner := "no owner recorded"
	if e.Owner != "" {
		owner = fmt.Sprintf("owner %q", e.Owner)
	}
	if e.Claim != "" {
		return fmt.Sprintf("checkpoint of pipeline %q not loaded from NATS KV bucket %q: this store fenced key %q for %q at revision %d, "+
			"but it is at revision %d (%s); another worker took the pipeline over: %v",
			e.Pipeline, e.Bucket, e.Key, e.Claim, e.Expected, e.Revision, owner, ErrNotOwner)
	}
	return fmt.Sprintf("checkpoint of pipeline %q not saved to NATS KV bucket %q: key %q is at revision %d (%s), "+
		"this store last saw revision %d; another worker took the pipeline over, so this one stops: %v",
		e.Pipeline, e.Bucket, e.Key, e.Revision, owner, e.Expected, ErrNotOwner)
}

func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// Store is a checkpoint store in one NATS KV bucket. It is safe for
// concurrent use; operations on different pipelines proceed in parallel.
// It satisfies pipeline.Checkpointer.
type Store struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	bucket   string
	stream   string // the bucket's stream, KV_<bucket>
	retryFor time.Duration
	now      func() time.Time

	mu   sync.Mutex // guards keys
	keys map[string]*keyState
}

// keyState is what a Store knows of one pipeline's key.
type keyState struct {
	mu    sync.Mutex // held across an operation on the key
	known bool       // Load or Fence read the key
	rev   uint64     // the key's last revision as read or written (0: never written)
	gen   uint64     // the last record's generation
	owner string     // the owner the records name
	claim string     // the owner this Store fenced the key for, if it did
}

// Open returns the store of cfg's bucket, creating the bucket with
// cfg.Replicas if it does not exist.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 1 || cfg.Replicas > MaxReplicas {
		return nil, fmt.Errorf("natskv: replicas %d: want 1 to %d", cfg.Replicas, MaxReplicas)
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if !validBucket(cfg.Bucket) {
		return nil, fmt.Errorf("natskv: bucket %q: use letters, digits, '_' and '-'", cfg.Bucket)
	}
	s := &Store{
		js: js, bucket: cfg.Bucket, stream: "KV_" + cfg.Bucket, retryFor: cfg.RetryFor,
		now: time.Now, keys: make(map[string]*keyState),
	}
	// Several workers may open the bucket at once: one creates it, the
	// others see it exist, or, while the replicated stream is being set
	// up, not found yet. Those answers are retried for a while.
	var st jetstream.Stream
	deadline := time.Now().Add(cfg.RetryFor)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		var err error
		st, err = s.openBucket(ctx, cfg)
		if err == nil {
			break
		}
		racing := errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
			errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
			NoPeersYet(err) ||
			// A request's own timeout (not the caller's), as when the
			// meta leader is busy placing the stream.
			(ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)))
		if !racing || time.Now().After(deadline) {
			return nil, fmt.Errorf("natskv: open bucket %q: %w", cfg.Bucket, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("natskv: open bucket %q: %w (after %v)", cfg.Bucket, ctx.Err(), err)
		}
	}
	if have := st.CachedInfo().Config.Replicas; have < cfg.Replicas {
		return nil, fmt.Errorf("natskv: bucket %q has %d replicas, the configuration asks for %d: "+
			"raise them (nats kv edit %s --replicas %d) or configure %d", cfg.Bucket, have, cfg.Replicas, cfg.Bucket, cfg.Replicas, have)
	}
	return s, nil
}

// jsErrNoPeers is JetStream's error code for a replicated stream that no
// set of servers can hold yet ("no suitable peers for placement"), as in a
// cluster whose servers have not all reported to its meta leader.
const jsErrNoPeers = 10005

// NoPeersYet reports whether err is JetStream refusing to place a
// replicated stream for want of servers: while a cluster starts, a retry
// succeeds.
func NoPeersYet(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrNoPeers
}

// openBucket binds s to the bucket, creating it if absent, and returns
// its stream.
func (s *Store) openBucket(ctx context.Context, cfg Config) (jetstream.Stream, error) {
	var err error
	s.kv, err = s.js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		s.kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "tide pipeline checkpoints",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s.kv, err = s.js.KeyValue(ctx, cfg.Bucket) // another worker created it first
		}
	}
	if err != nil {
		return nil, err
	}
	return s.js.Stream(ctx, s.stream)
}

// Bucket returns the store's bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Load returns the pipeline's checkpoint, or nil and no error if it has
// none. It remembers the key's revision, which the next Save must find:
// a Store that loads again adopts whatever was written since, so a worker
// loads only a key it holds. After a Fence, Load refuses (ErrNotOwner) a
// key that names another owner than the fenced one, or that was reset. A
// record that cannot be trusted is a *checkpoint.CorruptError.
func (s *Store) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	ks := s.state(pipeline)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	cur, err := s.read(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	if ks.claim != "" && (cur.rec == nil || cur.rec.Owner != ks.claim) {
		// Fenced for one owner, the key now names another (or was
		// reset): loading would adopt the other owner's revision.
		e := &NotOwnerError{Pipeline: pipeline, Bucket: s.bucket, Key: Key(pipeline), Expected: ks.rev, Revision: cur.rev, Claim: ks.claim}
		if cur.rec != nil {
			e.Owner = cur.rec.Owner
		}
		return nil, e
	}
	ks.known, ks.rev, ks.gen, ks.owner = true, cur.rev, 0, ""
	if cur.rec == nil {
		return nil, nil
	}
	ks.gen, ks.owner = cur.rec.Generation, cur.rec.Owner
	if cur.rec.Generation == 0 {
		return nil, nil // a claim: owned, never saved
	}
	cp := cur.rec.Checkpoint()
	return &cp, nil
}

// Save writes cp as the pipeline's checkpoint if the key is still at the
// revision this Store last read or wrote (or, before any Load, if it has
// no record). Otherwise it writes nothing and returns a *NotOwnerError.
func (s *Store) Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	ks := s.state(pipeline)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	b, err := checkpoint.Encode(pipeline, ks.gen+1, ks.owner, cp, s.now())
	if err != nil {
		return fmt.Errorf("natskv: pipeline %q: %w", pipeline, err)
	}
	rev, err := s.write(ctx, pipeline, b, ks)
	if err != nil {
		return err
	}
	ks.known, ks.rev, ks.gen = true, rev, ks.gen+1
	return nil
}

// Fence makes owner the pipeline's owner: it rewrites the current record
// (same checkpoint, owner recorded; a claim of generation 0 if there is
// none) by compare-and-set, so that the next Save of any Store that read
// the key earlier fails with ErrNotOwner. This Store's own next Save
// continues from the fenced record. A concurrent save makes it read again
// and retry. A corrupt record is not fenced: its *checkpoint.CorruptError
// is returned.
func (s *Store) Fence(ctx context.Context, pipeline, owner string) error {
	ks := s.state(pipeline)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for attempt := 0; ; attempt++ {
		cur, err := s.read(ctx, pipeline)
		if err != nil {
			return err
		}
		var cp cdc.Checkpoint
		var gen uint64
		if cur.rec != nil {
			cp, gen = cur.rec.Checkpoint(), cur.rec.Generation
		}
		b, err := checkpoint.Encode(pipeline, gen, owner, cp, s.now())
		if err != nil {
			return fmt.Errorf("natskv: pipeline %q: %w", pipeline, err)
		}
		probe := &keyState{known: true, rev: cur.rev}
		rev, err := s.write(ctx, pipeline, b, probe)
		var no *NotOwnerError
		if errors.As(err, &no) && attempt < 10 {
			continue // a save came in between: fence what it wrote
		}
		if err != nil {
			return fmt.Errorf("natskv: fence pipeline %q for %q: %w", pipeline, owner, err)
		}
		ks.known, ks.rev, ks.gen, ks.owner, ks.claim = true, rev, gen, owner, owner
		return nil
	}
}

// Reset deletes the pipeline's checkpoint and its history, whoever owns
// it: any Store's next Save of it fails with ErrNotOwner, this one's too
// until it loads again.
func (s *Store) Reset(ctx context.Context, pipeline string) error {
	ks := s.state(pipeline)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	key := Key(pipeline)
	err := s.retry(ctx, func(ctx context.Context) error { return s.kv.Purge(ctx, key) })
	if err != nil {
		return fmt.Errorf("natskv: reset pipeline %q (bucket %q, key %q): %w", pipeline, s.bucket, key, err)
	}
	ks.known, ks.rev, ks.gen, ks.owner, ks.claim = false, 0, 0, "", ""
	return nil
}

// Raw returns the bytes of the pipeline's record as stored and their
// revision, without verifying them, so that a damaged record can be shown;
// nil if there is none.
func (s *Store) Raw(ctx context.Context, pipeline string) ([]byte, uint64, error) {
	m, err := s.last(ctx, Key(pipeline))
	if err != nil || m == nil || m.op != "" {
		return nil, 0, err
	}
	return m.data, m.seq, nil
}

// Owner returns the owner the pipeline's record names and its revision,
// as stored now ("" and 0 if it has no record).
func (s *Store) Owner(ctx context.Context, pipeline string) (string, uint64, error) {
	cur, err := s.read(ctx, pipeline)
	if err != nil || cur.rec == nil {
		return "", cur.rev, err
	}
	return cur.rec.Owner, cur.rev, nil
}

func (s *Store) state(pipeline string) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[pipeline]
	if ks == nil {
		ks = &keyState{}
		s.keys[pipeline] = ks
	}
	return ks
}

// current is a key's latest revision and its record (nil if it has none).
type current struct {
	rev uint64
	rec *checkpoint.Record
}

// read returns the key's latest state, read from the stream's leader.
func (s *Store) read(ctx context.Context, pipeline string) (current, error) {
	key := Key(pipeline)
	m, err := s.last(ctx, key)
	if err != nil {
		return current{}, fmt.Errorf("natskv: read pipeline %q (bucket %q, key %q): %w", pipeline, s.bucket, key, err)
	}
	if m == nil {
		return current{}, nil
	}
	if m.op != "" { // deleted or purged: no record, but a revision to compare with
		return current{rev: m.seq}, nil
	}
	rec, err := checkpoint.Decode(s.where(key), pipeline, m.data)
	if err != nil {
		return current{rev: m.seq}, err
	}
	return current{rev: m.seq, rec: rec}, nil
}

func (s *Store) where(key string) string {
	return fmt.Sprintf("in NATS KV bucket %q key %q", s.bucket, key)
}

// write stores b if the key is at ks.rev (or, if !ks.known, has no
// record) and returns the new revision. When NATS does not answer it
// retries; if a lost reply hid a write that succeeded, it finds b stored
// and returns that revision.
func (s *Store) write(ctx context.Context, pipeline string, b []byte, ks *keyState) (uint64, error) {
	key := Key(pipeline)
	var rev uint64
	refused := false
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		if ks.known {
			rev, err = s.kv.Update(ctx, key, b, ks.rev)
		} else {
			rev, err = s.kv.Create(ctx, key, b)
		}
		if err == nil || !isConflict(err) {
			return err
		}
		// A conflict: someone else wrote, unless it was our own write of
		// an earlier attempt whose reply was lost.
		m, rerr := s.last(ctx, key)
		if rerr != nil {
			return rerr
		}
		if m != nil && m.op == "" && bytes.Equal(m.data, b) && m.seq > ks.rev {
			rev = m.seq
			return nil
		}
		if m != nil && m.seq == ks.rev && ks.known {
			// Nobody wrote: a replica that had not caught up refused.
			return fmt.Errorf("%w (the key is still at revision %d)", errSpurious, ks.rev)
		}
		refused = true
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("natskv: save pipeline %q (bucket %q, key %q, revision %d): %w", pipeline, s.bucket, key, ks.rev, err)
	}
	if refused {
		e := &NotOwnerError{Pipeline: pipeline, Bucket: s.bucket, Key: key, Expected: ks.rev}
		if cur, err := s.read(ctx, pipeline); err == nil || cur.rev != 0 {
			e.Revision = cur.rev
			if cur.rec != nil {
				e.Owner = cur.rec.Owner
			}
		}
		return 0, e
	}
	return rev, nil
}

// errSpurious is a compare-and-set refused although the key is at the
// expected revision, as a stream leader just elected may answer before it
// applied the last writes; the write is tried again.
var errSpurious = errors.New("revision conflict not confirmed by a read")

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// retry runs op until it succeeds, fails for a reason other than NATS not
// answering, ctx ends or s.retryFor passes.
func (s *Store) retry(ctx context.Context, op func(context.Context) error) error {
	deadline := time.Now().Add(s.retryFor)
	wait := 50 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, min(5*time.Second, s.retryFor))
		err := op(octx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil && ctx.Err() != nil {
				return errors.Join(ctx.Err(), err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// transient reports whether err means NATS did not answer in time, as
// while a server restarts or a stream elects a leader.
func transient(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		// 503: JetStream not (yet) available, e.g. no stream leader.
		return api.Code == 503 || api.Code == 408
	}
	return errors.Is(err, errSpurious) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// lastMsg is the last message of a key's subject.
type lastMsg struct {
	seq  uint64
	op   string // "" for a value, else DEL or PURGE
	data []byte
}

// last returns the key's last message, or nil if its subject has none. It
// asks the stream's leader (not a direct get, which a lagging replica may
// answer), so that a revision just written is never missed, and it keeps
// the revision of a delete marker, which the next write must name.
func (s *Store) last(ctx context.Context, key string) (*lastMsg, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + s.bucket + "." + key})
	if err != nil {
		return nil, err
	}
	var out *lastMsg
	err = s.retry(ctx, func(ctx context.Context) error {
		reply, err := s.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.stream, req)
		if err != nil {
			return err
		}
		var resp struct {
			Error   *jetstream.APIError `json:"error"`
			Message *struct {
				Seq    uint64 `json:"seq"`
				Header []byte `json:"hdrs"`
				Data   []byte `json:"data"`
			} `json:"message"`
		}
		if err := json.Unmarshal(reply.Data, &resp); err != nil {
			return fmt.Errorf("decode message get reply: %w", err)
		}
		if resp.Error != nil {
			if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
				out = nil
				return nil
			}
			return resp.Error
		}
		if resp.Message == nil {
			return errors.New("message get reply holds no message")
		}
		m := &lastMsg{seq: resp.Message.Seq, data: resp.Message.Data}
		if len(resp.Message.Header) > 0 {
			h, err := nats.DecodeHeadersMsg(resp.Message.Header)
			if err != nil {
				return fmt.Errorf("decode headers of revision %d: %w", m.seq, err)
			}
			m.op = h.Get("KV-Operation")
		}
		out = m
		return nil
	})
	return out, err
}

// Key returns the KV key of a pipeline: its name, with any byte that a
// key may not hold, and a '.' that would start or end it or follow
// another '.', written as =XX (hex). '=' itself is escaped, so distinct
// names have distinct keys. Tide's pipeline names are keys as they are.
func Key(pipeline string) string {
	var b strings.Builder
	for i := 0; i < len(pipeline); i++ {
		c := pipeline[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/'
		if c == '.' {
			ok = i > 0 && i < len(pipeline)-1 && pipeline[i-1] != '.'
		}
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	if b.Len() == 0 {
		return "=" // the empty name; "=" is no escape's start of a valid key otherwise
	}
	return b.String()
}

func validBucket(b string) bool {
	if b == "" {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
