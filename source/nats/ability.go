package nats

import (
	"time"

	"github.com/tide-cdc/tide/cdc"
)

var _ cdc.Lagger = (*Source)(nil)

// Lag is, for a JetStream consumer, the consumer's pending count as last
// read (every LagPollInterval); a core subscription has no backlog to
// count. Positions are sequence numbers: the stream's, or the
// subscription's.
func (s *Source) Lag(time.Time) cdc.Lag {
	if s.cfg.Mode == modeCore {
		return cdc.Lag{Sequenced: true}
	}
	return cdc.Lag{Messages: s.Stats().Lag, MessagesKnown: true, Sequenced: true}
}

// Describe tells the sink's configuration that the records are messages,
// not documents with an _id.
func (c Config) Describe() cdc.SourceInfo {
	return cdc.SourceInfo{Section: "source.nats", PartialUpdates: "source.nats: messages are not documents"}
}
