package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/internal/placeholder"
)

// Config configures a Sink. Its yaml tags are the sink.nats section of a
// pipeline file; zero values mean the defaults, applied by New.
type Config struct {
	Pipeline string   `yaml:"-"`                    // required: the first part of every Nats-Msg-Id
	Servers  []string `yaml:"servers" secret:"uri"` // default nats://127.0.0.1:4222
	Auth     Auth     `yaml:"auth"`
	TLS      TLS      `yaml:"tls"`

	Stream       string      `yaml:"stream"`        // required
	CreateStream *StreamSpec `yaml:"create_stream"` // create the stream if it is missing; nil: it must exist
	Subject      string      `yaml:"subject"`       // template with {db} {coll} {op} {namespace} {route}; default "cdc.{db}.{coll}"
	MaxInFlight  int         `yaml:"max_in_flight"` // publishes awaiting their PubAck; default 4096

	PublishTimeout time.Duration `yaml:"-"` // how long Commit waits for the PubAcks; default 30s

	// MaxOutage bounds how long Open waits for NATS to become reachable,
	// and how long Commit retries a batch without any of it getting
	// through; default DefaultMaxOutage.
	MaxOutage time.Duration `yaml:"max_outage"`

	// Conn, if set, is used instead of dialing Servers; Close leaves it
	// open. Make it with nats.ReconnectBufSize(-1): a connection that
	// buffers publishes while it reconnects can store a record before
	// an earlier one lost with the connection.
	Conn   *nats.Conn   `yaml:"-"`
	Logger *slog.Logger `yaml:"-"`
}

// Auth holds credentials; set at most one kind.
type Auth = natsconn.Auth

// TLS configures the connection's TLS.
type TLS = natsconn.TLS

// StreamSpec is the stream Open creates when it is missing.
type StreamSpec struct {
	Subjects        []string      `yaml:"subjects"`         // default ["cdc.>"]
	Storage         string        `yaml:"storage"`          // "file" (default) or "memory"
	Replicas        int           `yaml:"replicas"`         // default 1
	DuplicateWindow time.Duration `yaml:"duplicate_window"` // default 2m
}

// Sink publishes records to JetStream. It implements cdc.Sink.
type Sink struct {
	cfg     Config
	log     *slog.Logger
	subject []placeholder.Part
	report  cdc.RetryFunc // SetRetry's; nil outside a pipeline

	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream

	// Publish options, made once: per-message options would allocate.
	pubOpts []jetstream.PublishOpt
	// denied receives the connection's permission violations, which the
	// server reports instead of a PubAck.
	denied chan error
	// reconnected is signalled when the sink's own connection is back,
	// to end a retry's backoff early.
	reconnected chan struct{}

	futures []pending // put since the last Commit, in order
	unsent  error     // why a publish of this batch failed: later records wait for Commit
	refused error     // a record of this batch the server will never take (over max_payload); Commit reports it
	msgID   []byte
	dups    uint64
}

// pending is one record of the batch: its message, kept for a retry,
// and the future of its latest publish.
type pending struct {
	msg *nats.Msg
	f   jetstream.PubAckFuture // nil: not published yet
	pos cdc.Position
}

// New returns a Sink for cfg. It does no I/O; Open connects.
func New(cfg Config) *Sink {
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{nats.DefaultURL}
	}
	if cfg.Subject == "" {
		cfg.Subject = "cdc.{db}.{coll}"
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 4096
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 30 * time.Second
	}
	if cfg.MaxOutage <= 0 {
		cfg.MaxOutage = DefaultMaxOutage
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cs := cfg.CreateStream; cs != nil {
		c := *cs
		if len(c.Subjects) == 0 {
			c.Subjects = []string{"cdc.>"}
		}
		if c.Storage == "" {
			c.Storage = "file"
		}
		if c.Replicas <= 0 {
			c.Replicas = 1
		}
		if c.DuplicateWindow <= 0 {
			c.DuplicateWindow = 2 * time.Minute
		}
		cfg.CreateStream = &c
	}
	return &Sink{
		cfg: cfg,
		log: cfg.Logger.With("sink", "nats", "stream", cfg.Stream),
		pubOpts: []jetstream.PublishOpt{
			jetstream.WithStallWait(cfg.PublishTimeout),
			// No retry inside the client: it republishes a message while
			// later ones go ahead, which could store them out of order.
			// Commit retries instead, in order.
			jetstream.WithRetryAttempts(0),
		},
		denied:      make(chan error, 1),
		reconnected: make(chan struct{}, 1),
	}
}

// Duplicates reports how many publishes the stream dropped as duplicates:
// records replayed after a restart, or republished after an outage.
func (s *Sink) Duplicates() uint64 { return s.dups }

// Open connects and checks (or creates) the stream. ctx bounds the setup.
// While NATS is unreachable it waits, logging that it does, for up to
// MaxOutage.
func (s *Sink) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	if s.cfg.Pipeline == "" {
		return errors.New("nats sink: a pipeline name is required for message ids")
	}
	if s.cfg.Stream == "" {
		return errors.New("nats sink: a stream is required")
	}
	parts, err := parseSubject(s.cfg.Subject)
	if err != nil {
		return fmt.Errorf("nats sink: %w", err)
	}
	s.subject = parts
	servers := natsconn.RedactServers(s.cfg.Servers)
	o := newOutage(s.cfg.MaxOutage, time.Now())
	for {
		err := s.tryOpen(ctx)
		if err == nil {
			if o.attempts > 0 {
				s.log.Info("nats reachable; sink open", "servers", servers, "waited", o.length())
				s.reportRetry(0, nil)
			}
			// A permission violation seen so far (checkSync asks the
			// system account) is not about a publish.
			select {
			case <-s.denied:
			default:
			}
			return nil
		}
		if !transient(err) || ctx.Err() != nil {
			s.closeOwnConn()
			return err
		}
		// Connected, NATS is reachable, and JetStream is what is missing.
		connected := s.nc != nil && s.nc.IsConnected()
		if o.over() {
			what := "NATS at %s was unreachable for %s (max_outage %s): %w"
			if connected {
				what = "JetStream at %s did not answer for %s (max_outage %s): %w"
			}
			s.closeOwnConn()
			return fmt.Errorf("nats sink: "+what, servers, o.length(), s.cfg.MaxOutage, explain(err))
		}
		if o.shouldLog() {
			msg := "waiting for nats to become reachable"
			if connected {
				msg = "waiting for jetstream to answer"
			}
			s.log.Warn(msg, "servers", servers, "waited", o.length(), "max_outage", s.cfg.MaxOutage, "err", explain(err))
		}
		s.reportRetry(o.attempts+1, explain(err))
		if err := o.sleep(ctx, nil); err != nil {
			s.closeOwnConn()
			return fmt.Errorf("nats sink: waiting for NATS at %s: %w", servers, err)
		}
	}
}

// tryOpen makes one attempt at Open: it connects, unless connected
// already, and looks up or creates the stream.
func (s *Sink) tryOpen(ctx context.Context) error {
	if s.nc == nil {
		if s.cfg.Conn != nil {
			s.nc = s.cfg.Conn
		} else {
			nc, err := s.connect()
			if err != nil {
				return err
			}
			s.nc, s.ownConn = nc, true
		}
	}
	return s.openStream(ctx)
}

func (s *Sink) closeOwnConn() {
	if s.ownConn && s.nc != nil {
		s.nc.Close()
	}
	s.nc, s.ownConn = nil, false
}

func (s *Sink) openStream(ctx context.Context) error {
	js, err := jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(s.cfg.MaxInFlight))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	s.js = js
	st, err := js.Stream(ctx, s.cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && s.cfg.CreateStream != nil:
		cs := s.cfg.CreateStream
		sc := jetstream.StreamConfig{
			Name:       s.cfg.Stream,
			Subjects:   cs.Subjects,
			Storage:    jetstream.FileStorage,
			Replicas:   cs.Replicas,
			Duplicates: cs.DuplicateWindow,
		}
		if cs.Storage == "memory" {
			sc.Storage = jetstream.MemoryStorage
		}
		if st, err = js.CreateStream(ctx, sc); err != nil {
			return fmt.Errorf("create stream %s: %w", s.cfg.Stream, err)
		}
		s.log.Info("created stream", "subjects", cs.Subjects, "duplicate_window", cs.DuplicateWindow)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("stream %s does not exist; create it or set create_stream", s.cfg.Stream)
	case err != nil:
		return fmt.Errorf("look up stream %s: %w", s.cfg.Stream, err)
	}
	info := st.CachedInfo()
	if info.Config.Duplicates <= 0 {
		s.log.Warn("stream has no duplicate window: a replay after a crash publishes records again (at-least-once)")
	}
	s.checkSync(ctx)
	return nil
}

// checkSync warns unless the server confirms that it fsyncs every write.
// Only a system-account connection can ask; others get the warning.
func (s *Sink) checkSync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msg, err := s.nc.RequestWithContext(ctx, "$SYS.REQ.SERVER.PING.VARZ", nil)
	if err == nil {
		var varz struct {
			Data struct {
				JetStream struct {
					Config struct {
						SyncInterval int64 `json:"sync_interval"`
						SyncAlways   bool  `json:"sync_always"`
					} `json:"config"`
				} `json:"jetstream"`
			} `json:"data"`
		}
		if json.Unmarshal(msg.Data, &varz) == nil {
			c := varz.Data.JetStream.Config
			if c.SyncAlways {
				return
			}
			s.log.Warn("the JetStream server fsyncs lazily (sync_interval); a PubAck can precede the write to disk, "+
				"so a machine crash of the server can lose acknowledged records: set sync_interval: always on the server",
				"sync_interval", time.Duration(c.SyncInterval))
			return
		}
	}
	s.log.Warn("cannot confirm the JetStream server's sync_interval; by default it acknowledges before fsync, " +
		"so a machine crash of the server can lose acknowledged records: set sync_interval: always on the server")
}

// Put publishes batch asynchronously; Commit waits for the PubAcks.
func (s *Sink) Put(ctx context.Context, batch []cdc.Record) error {
	for i := range batch {
		r := &batch[i]
		if len(r.Pos) == 0 {
			return fmt.Errorf("record on %s has no position to derive its Nats-Msg-Id from", r.Namespace)
		}
		// The client keeps the message until its PubAck arrives, and the
		// runtime reuses r.Data after Put: hand it a copy.
		m := &nats.Msg{
			Subject: s.render(r),
			Data:    append([]byte(nil), r.Data...),
			Header:  make(nats.Header, 4),
		}
		s.msgID = msgID(s.msgID[:0], s.cfg.Pipeline, r.Pos)
		id := string(s.msgID)
		m.Header["Nats-Msg-Id"] = []string{id}
		m.Header["Tide-Op"] = []string{string(r.Op)}
		m.Header["Tide-Namespace"] = []string{r.Namespace}
		if r.ClusterTime != (cdc.Timestamp{}) {
			m.Header["Tide-Cluster-Time"] = []string{strconv.FormatUint(uint64(r.ClusterTime.T), 10) + "." + strconv.FormatUint(uint64(r.ClusterTime.I), 10)}
		}
		p := pending{msg: m, pos: r.Pos}
		if s.unsent == nil {
			f, err := s.js.PublishMsgAsync(m, s.pubOpts...)
			switch {
			case err == nil:
				p.f = f
			case transient(err):
				// NATS is down. Publishing the records after this one
				// could store them before it: they all wait for Commit,
				// which publishes them in order once NATS is back.
				s.unsent = fmt.Errorf("publish %s to %s: %w", id, m.Subject, explain(err))
			case errors.Is(err, nats.ErrMaxPayload):
				// Refused for good: the others go on, and Commit says so,
				// so that the runtime can set this one aside (on_error)
				// and publish the others again under the same ids.
				if s.refused == nil {
					s.refused = fmt.Errorf("publish %s to %s (%d bytes): %w: %w", id, m.Subject, len(m.Data), err, cdc.ErrRefused)
				}
				continue
			default:
				return fmt.Errorf("publish %s to %s: %w", id, m.Subject, err)
			}
		}
		s.futures = append(s.futures, p)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Commit waits until the stream acknowledged every record put since the
// last Commit. When NATS is unreachable or does not answer, it publishes
// the batch again from its first unacknowledged record, in order and with
// the same Nats-Msg-Ids, so the stream drops the copies it already holds;
// it gives up after MaxOutage without progress. A permanent error fails
// it at once. A failed Commit saves no checkpoint, and a restart
// publishes the batch again under the same ids.
func (s *Sink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	batch := s.futures
	refused := s.refused
	defer func() {
		clear(batch) // drop the messages, keep the slice for the next batch
		s.futures, s.unsent, s.refused = batch[:0], nil, nil
	}()
	if len(batch) == 0 {
		return refused
	}
	start := time.Now()
	first, nerr, err := s.await(ctx, batch, s.cfg.PublishTimeout)
	if err == nil {
		return refused
	}
	if ctx.Err() != nil {
		return fmt.Errorf("commit %d records: %w", len(batch), ctx.Err())
	}
	if err = s.classify(ctx, err, batch[first].msg.Subject); !transient(err) {
		return fmt.Errorf("commit %d records: %d publishes failed, first: %w", len(batch), nerr, err)
	}
	if err := s.retry(ctx, batch, first, err, start); err != nil {
		return err
	}
	return refused
}

// retry republishes batch[first:] until the stream acknowledged all of
// it, MaxOutage passed without progress, or a permanent error.
func (s *Sink) retry(ctx context.Context, batch []pending, first int, err error, start time.Time) error {
	o := newOutage(s.cfg.MaxOutage, start)
	servers := natsconn.RedactServers(s.cfg.Servers)
	for {
		if o.over() {
			return fmt.Errorf("commit %d records: NATS at %s unavailable for %s (max_outage %s), %d records not acknowledged; last error: %w",
				len(batch), servers, o.length(), s.cfg.MaxOutage, len(batch)-first, err)
		}
		if o.shouldLog() {
			s.log.Warn("nats unavailable; retrying the batch from its first unacknowledged record",
				"servers", servers, "records", len(batch)-first, "outage", o.length(), "max_outage", s.cfg.MaxOutage, "err", err)
		}
		s.reportRetry(o.attempts+1, err)
		if err := o.sleep(ctx, s.reconnected); err != nil {
			return fmt.Errorf("commit %d records: %w", len(batch), err)
		}
		next, rerr := s.republish(ctx, batch, first, time.Until(o.since.Add(o.max)))
		if rerr == nil {
			s.log.Info("nats available again; batch acknowledged", "records", len(batch),
				"retries", o.attempts, "took", time.Since(start).Round(time.Millisecond))
			s.reportRetry(0, nil)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("commit %d records: %w", len(batch), ctx.Err())
		}
		if rerr = s.classify(ctx, rerr, batch[min(next, len(batch)-1)].msg.Subject); !transient(rerr) {
			return fmt.Errorf("commit %d records: republish after an outage: %w", len(batch), rerr)
		}
		if next > first {
			o.progressed()
			first = next
		}
		err = rerr
	}
}

// republish publishes batch[from:] again, in order, at most MaxInFlight
// at a time, waiting for each window's PubAcks before the next: the
// stream then stores the records that were missing in batch order, and
// drops the ones it holds as duplicates. It returns the index of the
// first record still not acknowledged and why.
func (s *Sink) republish(ctx context.Context, batch []pending, from int, wait time.Duration) (int, error) {
	wait = min(max(wait, time.Second), s.cfg.PublishTimeout)
	for lo := from; lo < len(batch); {
		hi := min(lo+s.cfg.MaxInFlight, len(batch))
		var perr error
		n := lo
		for ; n < hi; n++ {
			p := &batch[n]
			f, err := s.js.PublishMsgAsync(p.msg, s.pubOpts...)
			if err != nil {
				perr = fmt.Errorf("publish of position %s: %w", p.pos, explain(err))
				break
			}
			p.f = f
		}
		if i, _, err := s.await(ctx, batch[lo:n], wait); err != nil {
			return lo + i, err
		}
		if perr != nil {
			return n, perr
		}
		lo = n
	}
	return len(batch), nil
}

// await waits for the PubAck of every record in batch, for up to wait.
// It returns the index of the first record not acknowledged, how many
// failed, and the first failure; a record that Put did not publish
// counts as failed with the error that stopped Put publishing.
func (s *Sink) await(ctx context.Context, batch []pending, wait time.Duration) (first, nerr int, failed error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	first = len(batch)
	fail := func(i int, err error) {
		nerr++
		if failed == nil {
			first = i
			failed = fmt.Errorf("publish of position %s: %w", batch[i].pos, err)
		}
	}
	for i, p := range batch {
		if p.f == nil {
			if failed == nil {
				first, failed = i, s.unsent
			}
			nerr++
			continue
		}
		select {
		case ack := <-p.f.Ok():
			if ack.Duplicate {
				s.dups++
			}
		case err := <-p.f.Err():
			fail(i, err)
		case err := <-s.denied:
			fail(i, err)
			return first, nerr, failed
		case <-t.C:
			if failed == nil {
				first, failed = i, fmt.Errorf("%w within %s for position %s", errNoPubAck, wait, p.pos)
			}
			return first, nerr + len(batch) - i, failed
		case <-ctx.Done():
			return i, nerr, ctx.Err()
		}
	}
	return first, nerr, failed
}

// classify turns a "no response from stream" for subject into a
// permanent error when no stream captures the subject: JetStream is up,
// and no stream will ever answer. Other errors, and this one while
// JetStream does not answer either, are returned as they are.
func (s *Sink) classify(ctx context.Context, err error, subject string) error {
	if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, lerr := s.js.StreamNameBySubject(ctx, subject); errors.Is(lerr, jetstream.ErrStreamNotFound) {
		return permanentError{fmt.Errorf("subject %s is not captured by stream %s or any other: %w", subject, s.cfg.Stream, err)}
	}
	return err
}

// Close closes the connection the sink opened. Records not committed are
// not waited for: the runtime saved no checkpoint for them.
func (s *Sink) Close() error {
	s.futures = nil
	if s.ownConn && s.nc != nil {
		s.nc.Close()
	}
	return nil
}

// msgID appends pipeline ":" position to b, using the position itself when
// it is short JSON text and a SHA-256 of it otherwise.
func msgID(b []byte, pipeline string, pos cdc.Position) []byte {
	b = append(b, pipeline...)
	b = append(b, ':')
	if len(pos) <= 96 && printable(pos) {
		return append(b, pos...)
	}
	sum := sha256.Sum256(pos)
	return hex.AppendEncode(b, sum[:16])
}

func printable(p []byte) bool {
	for _, c := range p {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// subjectFields are the placeholders a subject template may hold.
var subjectFields = []string{"db", "coll", "op", "namespace", "route"}

// parseSubject parses a subject template.
func parseSubject(tmpl string) ([]placeholder.Part, error) {
	parts, err := placeholder.Parse(tmpl, subjectFields...)
	if err != nil {
		return nil, fmt.Errorf("subject %w", err)
	}
	if strings.ContainsAny(tmpl, "*> \t") {
		return nil, fmt.Errorf("subject %q: wildcards and spaces cannot be published to", tmpl)
	}
	return parts, nil
}

// render fills the subject template for r. Characters a subject token
// cannot hold become '_'.
func (s *Sink) render(r *cdc.Record) string {
	var b strings.Builder
	db, coll, _ := strings.Cut(r.Namespace, ".")
	for _, p := range s.subject {
		switch p.Field {
		case "":
			b.WriteString(p.Lit)
		case "db":
			token(&b, db, false)
		case "coll":
			token(&b, coll, true)
		case "op":
			token(&b, string(r.Op), false)
		case "namespace":
			token(&b, r.Namespace, true)
		case "route": // a route transform's; its dots make tokens
			token(&b, r.Route, true)
		}
	}
	return b.String()
}

// token writes s as one subject token, or, with dots, as dot-separated
// tokens; an empty token becomes '_'.
func token(b *strings.Builder, s string, dots bool) {
	start := true // at the start of a token
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' && dots:
			if start {
				b.WriteByte('_')
			}
			b.WriteByte('.')
			start = true
			continue
		case c == '.', c == '*', c == '>', c <= ' ', c == 0x7f:
			c = '_'
		}
		b.WriteByte(c)
		start = false
	}
	if start {
		b.WriteByte('_')
	}
}

// connect dials the servers with the connection options shared with the
// NATS source (internal/natsconn), plus the sink's own: reconnects end a
// retry's backoff early, permission violations fail the commit, and
// publishes are never buffered while reconnecting.
func (s *Sink) connect() (*nats.Conn, error) {
	return natsconn.Connect(natsconn.Config{
		Name: s.cfg.Pipeline, Servers: s.cfg.Servers, Auth: s.cfg.Auth, TLS: s.cfg.TLS, Logger: s.log,
		OnReconnect: func() {
			select {
			case s.reconnected <- struct{}{}:
			default: // a retry will see the one already there
			}
		},
		OnError: func(_ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				select {
				case s.denied <- err:
				default: // one is enough to fail the commit
				}
			}
		},
	},
		// Refuse publishes while reconnecting instead of buffering them:
		// a buffered record sent on the new connection could be stored
		// before an earlier one lost with the old connection. Commit
		// republishes, in order.
		nats.ReconnectBufSize(-1),
	)
}
