package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/redact"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/internal/worker"
)

type workerFlags struct {
	nats       string
	pipelines  string
	id         string
	leaseTTL   time.Duration
	replicas   int
	httpAddr   string
	authFile   string // --http-auth-file
	insecure   bool   // --http-insecure
	logLevel   string
	logFormat  string
	drainGrace time.Duration
}

func newWorkerCmd(secrets *redact.Set) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker --nats URL [--pipelines DIR] [--id NAME] [--lease-ttl 10s]",
		Short: "Run a share of a group's pipelines, coordinated through NATS JetStream",
		Long: `Join a group of workers that share the pipelines of DIR (every worker reads
the same files) and those stored with tide pipeline put. Each pipeline runs on
exactly one worker at a time, under a lease in the tide_leases bucket; the
pipelines are spread evenly over the live workers, and move when one joins or
leaves: drained first, then released. A worker that dies loses its leases
after --lease-ttl, and the others resume its pipelines from their checkpoints.

SIGINT or SIGTERM hands every pipeline over (drain, release) and exits; a
second signal exits at once, leaving the leases to expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), f, cmd.ErrOrStderr(), secrets)
		},
	}
	host, _ := os.Hostname()
	cmd.Flags().StringVar(&f.nats, "nats", "", "NATS server URL(s), comma-separated (required)")
	cmd.Flags().StringVar(&f.pipelines, "pipelines", "", "directory of pipeline files (*.yaml) that every worker of the group reads")
	cmd.Flags().StringVar(&f.id, "id", host+"-"+strconv.Itoa(os.Getpid()), "this worker's name in the group; unique among live workers")
	cmd.Flags().DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "how long a lease outlives its last renewal (renewed every third of it)")
	cmd.Flags().IntVar(&f.replicas, "replicas", 1, "replicas of the group's buckets, when this worker creates them")
	cmd.Flags().StringVar(&f.httpAddr, "http-addr", "", "serve Prometheus metrics on this address, at /metrics (for example 127.0.0.1:9464)")
	cmd.Flags().StringVar(&f.authFile, "http-auth-file", "", "require basic auth on --http-addr: a file of one user:password (or user:bcrypt-hash) line; needed off loopback")
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow --http-addr off loopback without --http-auth-file, open to anyone who reaches it")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	cmd.Flags().DurationVar(&f.drainGrace, "drain-timeout", 30*time.Second, "how long handing the pipelines over may take before the worker stops hard")
	_ = cmd.MarkFlagRequired("nats")
	return cmd
}

func (f workerFlags) validate() error {
	var errs []error
	if f.leaseTTL < time.Second || f.leaseTTL > time.Hour {
		errs = append(errs, fmt.Errorf("--lease-ttl %s: want between 1s and 1h", f.leaseTTL))
	}
	if !worker.ValidKey(f.id) {
		errs = append(errs, fmt.Errorf("--id %q: want letters, digits, '-', '_', '=' and inner '.'", f.id))
	}
	if f.replicas < 1 || f.replicas > 5 {
		errs = append(errs, fmt.Errorf("--replicas %d: want 1 to 5", f.replicas))
	}
	if f.drainGrace <= 0 {
		errs = append(errs, fmt.Errorf("--drain-timeout %s: want a positive duration", f.drainGrace))
	}
	if err := status.CheckBind(f.httpAddr, f.authFile, f.insecure); err != nil {
		errs = append(errs, err)
	}
	if f.pipelines != "" {
		if st, err := os.Stat(f.pipelines); err != nil {
			errs = append(errs, fmt.Errorf("--pipelines: %w", err))
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("--pipelines %s: not a directory", f.pipelines))
		}
	}
	return errors.Join(errs...)
}

// connectNATS connects to the group's NATS servers, failing at once when
// none answers, and reconnecting forever afterwards.
func connectNATS(urls, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(urls, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", redact.String(urls), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream at %s: %w", redact.String(urls), err)
	}
	return nc, js, nil
}

func runWorker(ctx context.Context, f workerFlags, stderr io.Writer, secrets *redact.Set) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	log = redact.Logger(log, secrets)
	nc, js, err := connectNATS(f.nats, "tide worker "+f.id)
	if err != nil {
		return err
	}
	defer nc.Close()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	buckets, err := worker.OpenBuckets(octx, js, f.leaseTTL, f.replicas)
	cancel()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	w := worker.New(worker.Config{
		ID:           f.id,
		Host:         host,
		LeaseTTL:     f.leaseTTL,
		DrainTimeout: f.drainGrace,
		Dir:          f.pipelines,
		Buckets:      buckets,
		Logger:       log,
		Parse: func(origin string, text []byte) (string, error) {
			spec, err := tide.Parse(text, tide.Options{File: origin})
			if err != nil {
				return "", err
			}
			secrets.Add(spec.Secrets()...)
			return spec.Name, nil
		},
		Build: func(ctx context.Context, def worker.Definition, lease worker.Lease, reg prometheus.Registerer) (worker.Runner, error) {
			spec, err := tide.Parse(def.Text, tide.Options{File: def.Origin, Logger: log, Metrics: reg})
			if err != nil {
				return nil, err
			}
			// The checkpoint is fenced for this owner before the data
			// directory is locked (Spec.BuildFenced): a former owner
			// that was paused past its lease and still holds the
			// directory fails its next save, while this one waits for
			// the directory. Other stores cannot be fenced; see
			// README, Workers.
			p, err := spec.BuildFenced(ctx, lease.Owner())
			if errors.Is(err, tide.ErrCannotFence) {
				return spec.Build(ctx)
			}
			return p, err
		},
		Lag: lagOf,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), w)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	runCtx, abort := context.WithCancel(ctx)
	defer abort()

	if f.httpAddr != "" {
		srv, err := status.Listen(status.Config{Addr: f.httpAddr, AuthFile: f.authFile, Insecure: f.insecure,
			MetricsOnly: true, Metrics: w.Gatherer(reg), Logger: log,
			// Ready while connected to NATS, where the leases and the
			// checkpoints are.
			Ready: func() (bool, string) {
				if nc.IsConnected() {
					return true, ""
				}
				return false, "not connected to NATS"
			}})
		if err != nil {
			return err
		}
		hctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { // stopped and waited for below
			defer close(served)
			if err := srv.Run(hctx); err != nil {
				log.Warn("metrics server stopped", "err", err)
			}
		}()
		defer func() {
			stop()
			<-served
		}()
		log.Info("serving metrics", "addr", srv.URL()+"metrics")
	}

	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }() // waited for on every path below
	log.Info("worker started", "worker", f.id, "lease_ttl", f.leaseTTL.String(), "pipelines", f.pipelines)
	select {
	case err := <-done:
		return err
	case sig := <-sigs:
		log.Info("handing pipelines over", "signal", sig.String(), "timeout", f.drainGrace.String())
	}
	dctx, cancel := context.WithTimeout(context.Background(), f.drainGrace)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- w.Drain(dctx) }() // returns when Run does or dctx ends
	select {
	case err := <-drained:
		if err != nil {
			log.Warn("hand-over did not finish; stopping", "err", err)
			abort()
		}
	case sig := <-sigs:
		log.Warn("second signal: stopping at once; leases expire after --lease-ttl", "signal", sig.String())
		abort()
		<-drained
	}
	if err := <-done; err != nil {
		return err
	}
	log.Info("worker stopped")
	return nil
}

// lagOf reports how far a pipeline is behind its source, as the source
// measures it (status.ViewSource).
func lagOf(r worker.Runner) string {
	p, ok := r.(*tide.Pipeline)
	if !ok {
		return ""
	}
	v := status.ViewSource(p.Source, p.Stats(), time.Now())
	switch {
	case v.Lag.TimeKnown:
		return v.Lag.Time.Round(time.Millisecond).String()
	case v.Lag.MessagesKnown:
		return strconv.FormatUint(v.Lag.Messages, 10) + " msgs"
	}
	return ""
}
