package mongo

import (
	"errors"
	"fmt"

	"github.com/tide-cdc/tide/cdc"
)

// DefaultConfig returns the defaults of a pipeline file's sink.mongo
// section, which a program should start from too: the source's database
// and collection names, mirror mode, majority writes, failing on a
// refused write. Fill in the URI.
func DefaultConfig() Config {
	return Config{
		Database: DefaultDatabase, Collection: DefaultCollection, Mode: ModeMirror,
		WriteConcern: DefaultWriteConcern, OnWriteError: OnWriteErrorFail, CheckpointDatabase: DefaultCheckpointDatabase,
	}
}

// FitSource checks that a mirror gets documents with an _id, each update
// with its full document. Errors begin with their full path.
func (c *Config) FitSource(src cdc.SourceInfo) error {
	if c.Mode != ModeMirror {
		return nil
	}
	if !src.Documents {
		return fmt.Errorf("sink.mongo.mode: mirror applies MongoDB documents by _id, and %s messages have none: use mode: append", src.Section)
	}
	if !src.FullUpdates {
		return fmt.Errorf("%s, and sink.mongo mirror mode needs it (or use mode: append)", src.PartialUpdates)
	}
	return nil
}

// CheckFormat refuses an encoding named in the file: the sink writes BSON
// documents of its own, not encoded envelopes, so a format would be
// ignored.
func (Config) CheckFormat(format string, explicit bool) error {
	if explicit && format != "json" {
		return errors.New("the MongoDB sink writes BSON documents, not encoded envelopes: leave encode.format unset")
	}
	return nil
}
