package status

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed assets
var assets embed.FS

// csp allows the page nothing but its own server: no CDN, no inline
// script, no external request.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Config configures a Server.
type Config struct {
	// Addr is host:port to listen on. A host that is not loopback needs
	// AuthFile or Insecure (CheckBind).
	Addr string
	// AuthFile, if set, is a file of one user:password line (or
	// user:bcrypt-hash): every request then needs basic auth.
	AuthFile string
	// Insecure accepts a non-loopback Addr without AuthFile
	// (--http-insecure): anyone who reaches it can read what it serves.
	Insecure bool
	// MetricsOnly serves /metrics alone, without the page and /api/status,
	// for commands that track no pipeline of their own (tide serve, tide
	// worker).
	MetricsOnly bool
	// Metrics, if set, is served at /metrics.
	Metrics prometheus.Gatherer
	// Logger; nil discards.
	Logger *slog.Logger
	// Ready, if set, is asked by /readyz besides the pipelines: a
	// command's own readiness (tide serve: accepting connections).
	Ready func() (ok bool, reason string)
}

// Server serves the status page, /api/status and /metrics (or /metrics
// alone), and samples its trackers every second for the page's plots.
type Server struct {
	ln  net.Listener
	srv *http.Server
	mux *http.ServeMux // the routes, behind the checks of Listen
	log *slog.Logger

	page  bool                            // it serves pipelines (not MetricsOnly)
	ready func() (ok bool, reason string) // Config.Ready
	tick  atomic.Int64                    // Unix nanoseconds of the loop's last tick, for /healthz

	mu       sync.Mutex // guards trackers
	trackers []*Tracker
}

// Listen checks cfg and binds its address; Run serves. A non-loopback
// address without AuthFile or Insecure is refused (CheckBind).
func Listen(cfg Config) (*Server, error) {
	if err := CheckBind(cfg.Addr, cfg.AuthFile, cfg.Insecure); err != nil {
		return nil, err
	}
	loop, err := isLoopback(cfg.Addr)
	if err != nil {
		return nil, err
	}
	var creds *credentials
	if cfg.AuthFile != "" {
		if creds, err = readAuthFile(cfg.AuthFile); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !loop && creds == nil {
		log.Warn("serving HTTP without authentication on a non-loopback address (--http-insecure): "+
			"anyone who reaches it can read /metrics and any status page", "addr", cfg.Addr)
	}
	s := &Server{log: log, mux: http.NewServeMux(), page: !cfg.MetricsOnly, ready: cfg.Ready}
	s.routes(cfg.Metrics, !cfg.MetricsOnly)
	// From the outside in: the security headers, on every answer; on
	// loopback, the Host check against DNS rebinding; basic auth; the
	// checks of requests that may change something, for every route to
	// come that is not GET.
	var h http.Handler = guardWrites(s.mux)
	if creds != nil {
		h = basicAuth(creds, h)
	}
	if loop {
		h = loopbackOnly(h)
	}
	// The probes come before authentication and the Host check: a
	// kubelet reaches the pod's address without credentials, and they
	// reveal nothing but the state.
	h = securityHeaders(s.probes(h))
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	return s, nil
}

// routes registers what the server serves: the page and /api/status,
// if page, and /metrics, if metrics is set.
func (s *Server) routes(metrics prometheus.Gatherer, page bool) {
	if page {
		static, _ := fs.Sub(assets, "assets")
		files := http.FileServerFS(static)
		s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
		s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.ServeFileFS(w, r, static, "index.html")
		})
		s.mux.HandleFunc("GET /api/status", s.serveStatus)
		s.snapshotRoutes()
	}
	if metrics != nil {
		var opts promhttp.HandlerOpts
		if reg, ok := metrics.(prometheus.Registerer); ok {
			opts.Registry = reg // counts the handler's own errors
		}
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, opts))
	}
}

// securityHeaders sets the headers every answer carries.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// Add makes t part of /api/status and of the sampling.
func (s *Server) Add(t *Tracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackers = append(s.trackers, t)
}

// Remove takes t out of /api/status, as when a worker's pipeline moves to
// another worker.
func (s *Server) Remove(t *Tracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackers = slices.DeleteFunc(s.trackers, func(x *Tracker) bool { return x == t })
}

func (s *Server) snapshot() []*Tracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Tracker(nil), s.trackers...)
}

// Report is the document /api/status serves.
type Report struct {
	Time      time.Time `json:"time"`
	Pipelines []Status  `json:"pipelines"`
}

// serveStatus serves the Report. ?since=T adds the history after T (Unix
// seconds); since=0 gives all of it.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	var since float64
	q := r.URL.Query().Get("since")
	withHistory := q != ""
	if withHistory {
		v, err := strconv.ParseFloat(q, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("since=%q: want Unix seconds", q), http.StatusBadRequest)
			return
		}
		since = v
	}
	now := time.Now()
	rep := Report{Time: now.UTC(), Pipelines: []Status{}}
	for _, t := range s.snapshot() {
		rep.Pipelines = append(rep.Pipelines, t.Status(now, withHistory, since))
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	if err := enc.Encode(rep); err != nil {
		s.log.Debug("status: write /api/status", "err", err)
	}
}

// Addr is the bound address, useful when Addr had port 0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the page's address.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Run serves, and samples the trackers every second, until ctx is done;
// then it shuts the server down.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	s.sampleAll(time.Now())
	s.tick.Store(time.Now().UnixNano())
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("status server: %w", err)
		case now := <-tick.C:
			s.tick.Store(now.UnixNano())
			s.sampleAll(now)
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := s.srv.Shutdown(shutdownCtx)
			if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
				err = serveErr
			}
			return err
		}
	}
}

func (s *Server) sampleAll(now time.Time) {
	for _, t := range s.snapshot() {
		t.sample(now)
	}
}

// Close releases the listener of a server that will not be run.
func (s *Server) Close() error { return s.ln.Close() }
