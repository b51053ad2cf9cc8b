package config

// MongoSource configures the MongoDB change-stream source (source.mongo). Owned by the MongoDB CDC work.
type MongoSource struct{}
