package config

// NATSSource configures the NATS source (source.nats). Owned by the NATS work.
type NATSSource struct{}

// NATSSink configures the JetStream sink (sink.nats). Owned by the NATS work.
type NATSSink struct{}
