package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/natsconn"
)

// NATS publishes dead letters to a JetStream subject, one message a
// letter with the letter's ID as its Nats-Msg-Id: a letter written again
// after a crash, within the stream's duplicate window, is kept once.
// Write returns once every letter has its PubAck. It is a
// cdc.DeadLetterStore.
type NATS struct {
	pipeline string
	subject  string
	nc       *nats.Conn
	js       jetstream.JetStream
}

var _ cdc.DeadLetterStore = (*NATS)(nil)

// NATSConfig is where the letters go.
type NATSConfig struct {
	Pipeline string
	Servers  []string
	Subject  string // a stream must capture it
	Auth     natsconn.Auth
	TLS      natsconn.TLS
	Logger   *slog.Logger
}

// OpenNATS connects to the servers.
func OpenNATS(c NATSConfig) (*NATS, error) {
	nc, err := natsconn.Connect(natsconn.Config{Name: c.Pipeline + " dead letters", Servers: c.Servers, Auth: c.Auth, TLS: c.TLS, Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return &NATS{pipeline: c.Pipeline, subject: c.Subject, nc: nc, js: js}, nil
}

// publishTimeout bounds the wait for one letter's PubAck.
const publishTimeout = 10 * time.Second

func (n *NATS) Write(ctx context.Context, letters []cdc.DeadLetter) error {
	for _, dl := range letters {
		l, err := New(n.pipeline, dl)
		if err != nil {
			return err
		}
		data, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("dead letter at %s: %w", dl.Event.Pos, err)
		}
		m := nats.NewMsg(n.subject)
		m.Data = data
		m.Header.Set("Tide-Stage", l.Stage)
		m.Header.Set("Tide-Namespace", l.Namespace)
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		_, err = n.js.PublishMsg(pctx, m, jetstream.WithMsgID(l.ID))
		cancel()
		if err != nil {
			return fmt.Errorf("publish dead letter to %s: %w", n.subject, err)
		}
	}
	return nil
}

// Close closes the connection.
func (n *NATS) Close() error {
	n.nc.Close()
	return nil
}

// ReadNATS returns the letters on subject, oldest first, read with an
// ordered consumer from the stream that captures it.
func ReadNATS(ctx context.Context, c NATSConfig) ([]Letter, error) {
	n, err := OpenNATS(c)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	stream, err := n.js.StreamNameBySubject(ctx, c.Subject)
	if err != nil {
		return nil, fmt.Errorf("dead letters: no stream captures %s: %w", c.Subject, err)
	}
	cons, err := n.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.Subject}})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	var out []Letter
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 256)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var l Letter
			if err := json.Unmarshal(m.Data(), &l); err != nil {
				return nil, fmt.Errorf("dead letters: message on %s is not a letter: %w", m.Subject(), err)
			}
			out = append(out, l)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		if got == 0 {
			break
		}
		pending -= uint64(got)
	}
	return out, nil
}
