package natssink

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
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

	"github.com/tide-cdc/tide/internal/cdc"
)

// Config configures a Sink. It mirrors the sink.nats YAML section plus the
// pipeline name; zero values mean the defaults.
type Config struct {
	Pipeline string // required: the first part of every Nats-Msg-Id
	Servers  []string
	Auth     Auth
	TLS      TLS

	Stream       string
	CreateStream *StreamSpec // create the stream if it is missing; nil: it must exist
	Subject      string      // default "cdc.{db}.{coll}"
	MaxInFlight  int         // publishes awaiting their PubAck; default 4096

	PublishTimeout time.Duration // how long Commit waits for the PubAcks; default 30s

	// Conn, if set, is used instead of dialing Servers; Close leaves it open.
	Conn   *nats.Conn
	Logger *slog.Logger
}

// Auth holds credentials; set at most one kind.
type Auth struct {
	User, Password string
	Token          string
	CredsFile      string
	NKeySeedFile   string
}

// TLS configures the connection's TLS.
type TLS struct {
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
}

// StreamSpec is the stream Open creates when it is missing.
type StreamSpec struct {
	Subjects        []string      // default ["cdc.>"]
	Storage         string        // "file" (default) or "memory"
	Replicas        int           // default 1
	DuplicateWindow time.Duration // default 2m
}

// Sink publishes records to JetStream. It implements cdc.Sink.
type Sink struct {
	cfg     Config
	log     *slog.Logger
	subject []part

	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream

	futures []pending // published since the last Commit
	msgID   []byte
	dups    uint64
}

type pending struct {
	f   jetstream.PubAckFuture
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
	return &Sink{cfg: cfg, log: cfg.Logger.With("sink", "nats", "stream", cfg.Stream)}
}

// Duplicates reports how many publishes the stream dropped as duplicates:
// records replayed after a restart.
func (s *Sink) Duplicates() uint64 { return s.dups }

// Open connects and checks (or creates) the stream. ctx bounds the setup.
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
	s.nc = s.cfg.Conn
	if s.nc == nil {
		if s.nc, err = s.connect(); err != nil {
			return err
		}
		s.ownConn = true
	}
	if err := s.openStream(ctx); err != nil {
		if s.ownConn {
			s.nc.Close()
		}
		return err
	}
	return nil
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
		if r.Op == cdc.OpMarker {
			continue
		}
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
		f, err := s.js.PublishMsgAsync(m, jetstream.WithStallWait(s.cfg.PublishTimeout))
		if err != nil {
			return fmt.Errorf("publish %s to %s: %w", id, m.Subject, err)
		}
		s.futures = append(s.futures, pending{f: f, pos: r.Pos})
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Commit waits until the stream acknowledged every record put since the
// last Commit. Any publish error or a timeout fails it: the runtime then
// saves no checkpoint, and a restart publishes the batch again under the
// same ids.
func (s *Sink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	futures := s.futures
	s.futures = s.futures[:0]
	if len(futures) == 0 {
		return nil
	}
	t := time.NewTimer(s.cfg.PublishTimeout)
	defer t.Stop()
	var failed error
	nerr := 0
	for _, p := range futures {
		select {
		case ack := <-p.f.Ok():
			if ack.Duplicate {
				s.dups++
			}
		case err := <-p.f.Err():
			nerr++
			if failed == nil {
				failed = fmt.Errorf("publish of position %s: %w", p.pos, err)
			}
		case <-t.C:
			return fmt.Errorf("commit %d records: no PubAck within %s", len(futures), s.cfg.PublishTimeout)
		case <-ctx.Done():
			return fmt.Errorf("commit %d records: %w", len(futures), ctx.Err())
		}
	}
	if failed != nil {
		return fmt.Errorf("commit %d records: %d publishes failed, first: %w", len(futures), nerr, failed)
	}
	return nil
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

// part is one piece of a subject template: literal text, or a field.
type part struct {
	lit   string
	field string // "db", "coll", "op", "namespace" or ""
}

func parseSubject(tmpl string) ([]part, error) {
	var parts []part
	rest := tmpl
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			parts = append(parts, part{lit: rest})
			break
		}
		if i > 0 {
			parts = append(parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("subject %q: unclosed {", tmpl)
		}
		name := rest[i+1 : i+j]
		switch name {
		case "db", "coll", "op", "namespace":
		default:
			return nil, fmt.Errorf("subject %q: unknown placeholder {%s}; use {db} {coll} {op} {namespace}", tmpl, name)
		}
		parts = append(parts, part{field: name})
		rest = rest[i+j+1:]
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
		switch p.field {
		case "":
			b.WriteString(p.lit)
		case "db":
			token(&b, db, false)
		case "coll":
			token(&b, coll, true)
		case "op":
			token(&b, string(r.Op), false)
		case "namespace":
			token(&b, r.Namespace, true)
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

func (s *Sink) connect() (*nats.Conn, error) {
	log := s.log
	opts := []nats.Option{
		nats.Name("tide " + s.cfg.Pipeline),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
	}
	a := s.cfg.Auth
	switch {
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	case a.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("read nkey seed: %w", err)
		}
		opts = append(opts, o)
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if s.cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(s.cfg.TLS.CAFile))
	}
	if s.cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile))
	}
	if s.cfg.TLS.InsecureSkipVerify {
		opts = append(opts, nats.Secure(&tls.Config{InsecureSkipVerify: true}))
	}
	servers := strings.Join(s.cfg.Servers, ",")
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", servers, err)
	}
	return nc, nil
}
