package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/mongowire"
)

func newServeCmd() *cobra.Command {
	var (
		cfg          mongowire.Config
		otlpEndpoint string // --otlp-endpoint
		oplogSize    string
		queryMem     string
		logLevel     string
		logFormat    string
		tlsFiles     mongowire.TLSFiles
		insecure     bool
		auth         serveAuthFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded MongoDB-compatible server",
		Long: `Run Tide's embedded MongoDB-compatible server: a single-node replica set
with change streams, for development, CI and tide demo. Connect with
mongodb://ADDR/?replicaSet=rs0 or mongodb://ADDR/?directConnection=true.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { // before the server starts
			return status.CheckBind(auth.httpAddr, auth.httpAuthFile, auth.httpInsecure)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return err
			}
			if oplogSize != "" {
				n, err := cdc.ParseByteSize(oplogSize)
				if err != nil {
					return fmt.Errorf("--oplog-size: %w", err)
				}
				cfg.OplogBytes = int64(n)
			}
			if cfg.MaxQueryMemory, err = parseQueryMemory(queryMem); err != nil {
				return err
			}
			if err := secureServe(&cfg, tlsFiles, insecure, log); err != nil {
				return err
			}
			cfg.Logger = log
			if err := auth.apply(&cfg); err != nil {
				return err
			}
			if otlpEndpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
				tp, err := tide.NewTracerProvider(cmd.Context(), tide.Telemetry{OTLPEndpoint: otlpEndpoint}, os.Getenv, "")
				if err != nil {
					return fmt.Errorf("--otlp-endpoint: %w", err)
				}
				if tp != nil {
					defer func() {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						tp.Shutdown(ctx) // flushes the last spans
					}()
					cfg.Tracer = tp.Tracer("github.com/tide-cdc/tide/mongowire")
				}
			}
			srv := mongowire.New(cfg)
			cfg.AdminPassword = "" // the server holds the only copy, until Start derives the keys
			if err := srv.Start(); err != nil {
				return err
			}
			defer srv.Close()
			log.Info("serving", "addr", srv.Addr(), "uri", srv.URI(), "data_dir", cfg.DataDir, "auth", cfg.Auth)
			stop, err := serveHTTP(cmd.Context(), auth, srv, log)
			if err != nil {
				return err
			}
			defer stop()
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			select {
			case <-sigs:
			case <-cmd.Context().Done():
			}
			log.Info("shutting down")
			return srv.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&otlpEndpoint, "otlp-endpoint", "", "trace every command over OTLP: http://host:4318 or grpc://host:4317 (or set OTEL_EXPORTER_OTLP_ENDPOINT); off by default")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:27017", "listen address")
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep data in this directory across restarts (default: in memory)")
	f.StringVar(&cfg.ReplSet, "replset", "rs0", "replica set name")
	f.StringVar(&cfg.Advertise, "advertise", "", "host:port announced to clients (default: the listen address)")
	f.IntVar(&cfg.MaxConnections, "max-connections", 1000, "maximum live client connections")
	f.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", 0, "maximum live client connections from one IP address (default: a quarter of --max-connections; negative: no cap)")
	f.BoolVar(&cfg.EnableTestCommands, "enable-test-commands", false, "enable test-only commands such as configureFailPoint")
	f.StringVar(&oplogSize, "oplog-size", "256MiB", "oplog bound in bytes (units such as 64MiB)")
	f.StringVar(&queryMem, "max-query-memory", "", "memory all running queries may hold at once; a query past it fails with code 146, the server goes on (units such as 2GiB, or unlimited; default: a quarter of physical memory, here "+fmt.Sprintf("%.1fGiB", float64(mongowire.DefaultMaxQueryMemory())/(1<<30))+")")
	f.DurationVar(&cfg.OplogMinRetention, "oplog-min-retention", 0, "keep oplog entries at least this long, even past --oplog-size")
	f.DurationVar(&cfg.TTLMonitorInterval, "ttl-monitor-interval", 60*time.Second, "how often documents past a TTL index's expireAfterSeconds are deleted (negative: never)")
	f.DurationVar(&cfg.TransactionLifetimeLimit, "transaction-lifetime-limit", 60*time.Second, "abort a multi-document transaction still open this long (transactionLifetimeLimitSeconds)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&tlsFiles.CertFile, "tls-cert-file", "", "serve TLS only, with this PEM certificate (chain)")
	f.StringVar(&tlsFiles.KeyFile, "tls-key-file", "", "the PEM private key of --tls-cert-file")
	f.StringVar(&tlsFiles.CAFile, "tls-ca-file", "", "PEM CA certificates that client certificates must chain to")
	f.BoolVar(&tlsFiles.RequireClientCert, "tls-require-client-cert", false, "refuse TLS clients without a certificate signed by --tls-ca-file")
	f.BoolVar(&insecure, "insecure", false, "allow listening on a non-loopback address without --auth")

	// Authentication (see README "Security").
	f.BoolVar(&cfg.Auth, "auth", false, "require SCRAM authentication and check every command against the user's roles")
	f.StringVar(&cfg.AdminUser, "admin-user", "", "create this root user in admin at start if no user exists (password from --admin-password-file or "+adminPasswordEnv+")")
	f.StringVar(&auth.passwordFile, "admin-password-file", "", "file holding the password of --admin-user")
	f.IntVar(&cfg.AuthFailureLimit, "auth-failure-limit", 10, "close a connection after this many failed authentications")
	f.DurationVar(&cfg.AuthTimeout, "auth-timeout", 10*time.Second, "with --auth, close a connection that has not authenticated this long after connect; "+
		"one sending only hellos (drivers' monitoring) may wait twice this between them; negative: never")
	f.IntVar(&cfg.MaxUnauthenticatedConnections, "max-unauthenticated-connections", 64, "with --auth, cap connections not yet authenticated: "+
		"a new one past it closes the least recently active of them (negative: no cap)")
	f.StringVar(&auth.httpAddr, "http-addr", "", "serve Prometheus /metrics on this address (for example 127.0.0.1:9465); off by default")
	f.StringVar(&auth.httpAuthFile, "http-auth-file", "", "require basic auth on --http-addr: a file of one user:password (or user:bcrypt-hash) line; needed off loopback")
	f.BoolVar(&auth.httpInsecure, "http-insecure", false, "allow --http-addr off loopback without --http-auth-file, open to anyone who reaches it (--insecure is for --addr)")
	return cmd
}

// parseQueryMemory reads --max-query-memory: "" is the default (0 in
// mongowire.Config), "unlimited" is -1.
func parseQueryMemory(s string) (int64, error) {
	switch s {
	case "":
		return 0, nil
	case "unlimited":
		return -1, nil
	}
	n, err := cdc.ParseByteSize(s)
	if err != nil {
		return 0, fmt.Errorf("--max-query-memory: %w", err)
	}
	if n == 0 {
		return 0, fmt.Errorf("--max-query-memory: must be more than 0 bytes, or unlimited")
	}
	return int64(n), nil
}

// secureServe applies the TLS flags to cfg and refuses to open every
// database to the network: a non-loopback listen address needs --auth,
// or --insecure to accept the risk.
func secureServe(cfg *mongowire.Config, files mongowire.TLSFiles, insecure bool, log *slog.Logger) error {
	if files != (mongowire.TLSFiles{}) {
		t, err := files.Config()
		if err != nil {
			return fmt.Errorf("%w (flags --tls-cert-file, --tls-key-file, --tls-ca-file, --tls-require-client-cert)", err)
		}
		cfg.TLS = t
	}
	if cfg.Auth || isLoopback(cfg.Addr) {
		return nil
	}
	if !insecure {
		return fmt.Errorf("--addr %s is reachable from the network, and without --auth anyone who reaches it can read and change every database; "+
			"enable authentication with --auth --admin-user NAME --admin-password-file FILE (or TIDE_ADMIN_PASSWORD), "+
			"or pass --insecure to accept the risk", cfg.Addr)
	}
	log.Warn("serving without authentication on a non-loopback address (--insecure): anyone who reaches it can read and change every database", "addr", cfg.Addr)
	return nil
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// a loopback IP, or a name all of whose addresses are loopback. An empty
// host, 0.0.0.0 and :: listen on every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
