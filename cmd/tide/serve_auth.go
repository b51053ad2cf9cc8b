package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/mongowire"
)

// adminPasswordEnv gives the first user's password when no file does.
const adminPasswordEnv = "TIDE_ADMIN_PASSWORD"

// serveAuthFlags are the authentication flags of tide serve.
type serveAuthFlags struct {
	passwordFile string
	httpAddr     string
	httpAuthFile string
	httpInsecure bool
}

// apply resolves the first user's password into cfg: from
// --admin-password-file, or else TIDE_ADMIN_PASSWORD, never both. The
// variable is cleared once read, so that no child process inherits it.
func (f *serveAuthFlags) apply(cfg *mongowire.Config) error {
	env, hasEnv := os.LookupEnv(adminPasswordEnv)
	os.Unsetenv(adminPasswordEnv)
	switch {
	case f.passwordFile != "" && hasEnv:
		return fmt.Errorf("give the admin password by --admin-password-file or %s, not both", adminPasswordEnv)
	case f.passwordFile != "":
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return fmt.Errorf("--admin-password-file: %w", err)
		}
		cfg.AdminPassword = strings.TrimRight(string(b), "\r\n")
	case hasEnv:
		cfg.AdminPassword = env
	}
	switch {
	case cfg.AdminUser == "" && cfg.AdminPassword != "":
		return errors.New("an admin password was given without --admin-user NAME")
	case cfg.AdminUser != "" && cfg.AdminPassword == "":
		return fmt.Errorf("--admin-user %s needs a password: --admin-password-file FILE or %s", cfg.AdminUser, adminPasswordEnv)
	}
	return nil
}

// serveHTTP serves /metrics for srv on --http-addr, if set, from when it
// returns until stop, which waits for the HTTP server to finish.
func serveHTTP(ctx context.Context, f serveAuthFlags, srv *mongowire.Server, log *slog.Logger) (stop func(), err error) {
	if f.httpAddr == "" {
		return func() {}, nil
	}
	reg := metrics.NewRegistry()
	reg.MustRegister(authCollector{srv}, connCollector{srv})
	ms, err := status.Listen(status.Config{Addr: f.httpAddr, AuthFile: f.httpAuthFile, Insecure: f.httpInsecure,
		MetricsOnly: true, Metrics: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ms.Run(ctx); err != nil {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ms.Addr())
	return func() { cancel(); <-done }, nil
}

// authCollector exports the server's authentication counters.
type authCollector struct{ srv *mongowire.Server }

var (
	authSuccessesDesc = prometheus.NewDesc("tide_mongowire_auth_successes_total",
		"Successful authentications.", nil, nil)
	authFailuresDesc = prometheus.NewDesc("tide_mongowire_auth_failures_total",
		"Failed authentications by reason: unknown_user, wrong_password, mechanism_unavailable, malformed.", []string{"reason"}, nil)
	authUserFailuresDesc = prometheus.NewDesc("tide_mongowire_auth_user_failures_total",
		"Failed authentications per existing user (db.user).", []string{"user"}, nil)
	authClosedDesc = prometheus.NewDesc("tide_mongowire_auth_connections_closed_total",
		"Connections closed after too many failed authentications.", nil, nil)
)

func (authCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- authSuccessesDesc
	ch <- authFailuresDesc
	ch <- authUserFailuresDesc
	ch <- authClosedDesc
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.AuthStats()
	ch <- prometheus.MustNewConstMetric(authSuccessesDesc, prometheus.CounterValue, float64(st.Successes))
	for _, reason := range []string{"unknown_user", "wrong_password", "mechanism_unavailable", "malformed"} {
		ch <- prometheus.MustNewConstMetric(authFailuresDesc, prometheus.CounterValue, float64(st.Failures[reason]), reason)
	}
	for user, n := range st.UserFailures {
		ch <- prometheus.MustNewConstMetric(authUserFailuresDesc, prometheus.CounterValue, float64(n), user)
	}
	ch <- prometheus.MustNewConstMetric(authClosedDesc, prometheus.CounterValue, float64(st.ClosedConnections))
}
