package mongo

import (
	"log/slog"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
)

func indexModel(field string) mongo.IndexModel {
	return mongo.IndexModel{Keys: bson.D{{Key: field, Value: 1}}}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func checkpointOf(pos cdc.Position, meta map[string]string) cdc.Checkpoint {
	return cdc.Checkpoint{Source: pos, Meta: meta}
}
