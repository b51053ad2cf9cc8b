package main

import (
	"log/slog"

	"github.com/tide-cdc/tide/internal/config"
	natssink "github.com/tide-cdc/tide/sink/nats"
	natssource "github.com/tide-cdc/tide/source/nats"
)

func newNATSSource(pipeline string, n *config.NATSSource, log *slog.Logger) *natssource.Source {
	lag := n.LagPollInterval
	if lag == 0 {
		lag = -1 // in YAML, 0 turns the lag poll off; in the source, a negative interval does
	}
	return natssource.New(natssource.Config{
		Name:    pipeline,
		Servers: n.Servers,
		Auth: natssource.Auth{User: n.Auth.User, Password: n.Auth.Password, Token: n.Auth.Token,
			CredsFile: n.Auth.CredsFile, NKeySeedFile: n.Auth.NKeySeedFile},
		TLS: natssource.TLS{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile,
			InsecureSkipVerify: n.TLS.InsecureSkipVerify},
		Mode: n.Mode, Subject: n.Subject, QueueGroup: n.QueueGroup,
		Stream: n.Stream, Consumer: n.Consumer, FilterSubjects: n.FilterSubjects,
		Deliver: n.Deliver, StartSequence: n.StartSequence, StartTime: n.StartTime,
		Ack: n.Ack, AckWait: n.AckWait, MaxDeliver: n.MaxDeliver, MaxAckPending: n.MaxAckPending,
		FetchBatch: n.FetchBatch, FetchMaxWait: n.FetchMaxWait,
		Format: n.Format, OnDecodeError: n.OnDecodeError, DeadLetterSubject: n.DeadLetterSubject,
		LagPollInterval: lag,
		Logger:          log,
	})
}

func newNATSSink(pipeline string, n *config.NATSSink, log *slog.Logger) *natssink.Sink {
	var spec *natssink.StreamSpec
	if cs := n.CreateStream; cs != nil {
		spec = &natssink.StreamSpec{Subjects: cs.Subjects, Storage: cs.Storage, Replicas: cs.Replicas, DuplicateWindow: cs.DuplicateWindow}
	}
	return natssink.New(natssink.Config{
		Pipeline: pipeline,
		Servers:  n.Servers,
		Auth: natssink.Auth{User: n.Auth.User, Password: n.Auth.Password, Token: n.Auth.Token,
			CredsFile: n.Auth.CredsFile, NKeySeedFile: n.Auth.NKeySeedFile},
		TLS: natssink.TLS{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile,
			InsecureSkipVerify: n.TLS.InsecureSkipVerify},
		Stream: n.Stream, CreateStream: spec, Subject: n.Subject, MaxInFlight: n.MaxInFlight,
		MaxOutage: n.MaxOutage,
		Logger:    log,
	})
}
