package config

// PostgresSink configures the PostgreSQL sink (sink.postgres). Owned by the PostgreSQL work.
type PostgresSink struct{}
