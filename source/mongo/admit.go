package mongo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Identity keys, in the order they are checked against a checkpoint.
var identityKeys = []string{
	"connector", "format_version", "deployment_id", "database", "collection", "collection_uuid", "stream_hash",
}

// filterKeys are the identity keys of a source of many collections,
// checked after identityKeys ("" in both for one collection). The
// catalog.<n> keys are checked by prepareCatalog.
var filterKeys = []string{"collections", "exclude"}

// checkOrder is identityKeys with filterKeys before stream_hash, which
// covers the filters too: a changed filter is named as such.
var checkOrder = append(append(slices.Clone(identityKeys[:len(identityKeys)-1]), filterKeys...), "stream_hash")

const formatVersion = "1"

// live is what admission learns about the deployment and the collection.
type live struct {
	deploymentID   string // "replset:<replicaSetId hex>" or "cluster:<clusterId hex>"
	collectionUUID string // hex, or "" when the server reports none
	prePostImages  bool
	serverVersion  string  // buildInfo's version, "" if unknown
	splitSupported bool    // the server has $changeStreamSplitLargeEvent
	colls          catalog // the captured collections, for many collections
}

// admit checks the deployment and the collection, retrying transient
// failures.
func (s *Source) admit(ctx context.Context) (live, error) {
	var l live
	err := s.retry(ctx, "admit "+s.ns, func() error {
		var err error
		l, err = s.admitOnce(ctx)
		return err
	})
	return l, err
}

// retry runs f until it succeeds, fails permanently, or the retry
// policy gives up (or cfg.AdmitAttempts, where set, are spent), waiting a
// capped, jittered backoff between attempts. It is for setup steps,
// before the reader runs.
func (s *Source) retry(ctx context.Context, what string, f func() error) error {
	b := s.backoff()
	for {
		err := f()
		if err == nil {
			b.Succeed()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !transient(err) {
			return explain(s.ns, s.split, err)
		}
		s.metrics.errors.Add(1)
		if n := s.cfg.AdmitAttempts; n > 0 && b.Attempts()+1 >= n {
			return fmt.Errorf("%s: giving up after %d attempts: %w", what, n, err)
		}
		s.log.Warn("retrying", "what", what, "attempt", b.Attempts()+1, "err", err)
		if werr := b.Fail(ctx, err); werr != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
			}
			return fmt.Errorf("%s: %w", what, werr)
		}
	}
}

func (s *Source) admitOnce(ctx context.Context) (live, error) {
	var l live
	admin := s.client.Database("admin")
	var hello struct {
		SetName string `bson:"setName"`
		Msg     string `bson:"msg"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return l, fmt.Errorf("hello: %w", err)
	}
	switch {
	case hello.SetName != "":
		var reply struct {
			Config struct {
				Settings struct {
					ReplicaSetID bson.ObjectID `bson:"replicaSetId"`
				} `bson:"settings"`
			} `bson:"config"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "replSetGetConfig", Value: 1}}).Decode(&reply); err != nil {
			if isCode(err, codeUnauthorized) {
				return l, fmt.Errorf("%w: replSetGetConfig on replica set %q is not authorized: grant the user the clusterMonitor role, "+
					"which Tide needs to read the replica set's identity: %v", ErrNotAdmitted, hello.SetName, err)
			}
			return l, fmt.Errorf("replSetGetConfig: %w", err)
		}
		if reply.Config.Settings.ReplicaSetID.IsZero() {
			return l, fmt.Errorf("%w: replSetGetConfig on %q has no settings.replicaSetId", ErrNotAdmitted, hello.SetName)
		}
		l.deploymentID = "replset:" + reply.Config.Settings.ReplicaSetID.Hex()
	case hello.Msg == "isdbgrid":
		var v struct {
			ClusterID bson.ObjectID `bson:"clusterId"`
		}
		err := s.client.Database("config").Collection("version").FindOne(ctx, bson.D{}).Decode(&v)
		if err != nil {
			if isCode(err, codeUnauthorized) {
				return l, fmt.Errorf("%w: reading config.version behind mongos is not authorized: grant the user the clusterMonitor role: %v", ErrNotAdmitted, err)
			}
			return l, fmt.Errorf("read config.version: %w", err)
		}
		l.deploymentID = "cluster:" + v.ClusterID.Hex()
	default:
		return l, fmt.Errorf("%w: the server is a standalone mongod; change streams need a replica set or a sharded cluster "+
			"(for one node, start mongod with --replSet rs0 and run rs.initiate(), or use uri: embedded)", ErrNotAdmitted)
	}

	l.serverVersion, l.splitSupported = s.splitSupport(ctx)

	if s.multi != nil {
		var err error
		l.colls, err = s.listCaptured(ctx)
		return l, err
	}

	cur, err := s.client.Database(s.cfg.Database).ListCollections(ctx, bson.D{{Key: "name", Value: s.cfg.Collection}})
	if err != nil {
		if isCode(err, codeUnauthorized) {
			return l, fmt.Errorf("%w: listCollections on %s is not authorized: grant the user the read role on database %q: %v",
				ErrNotAdmitted, s.cfg.Database, s.cfg.Database, err)
		}
		return l, fmt.Errorf("listCollections %s: %w", s.cfg.Database, err)
	}
	var colls []collInfo // multi.go
	if err := cur.All(ctx, &colls); err != nil {
		return l, fmt.Errorf("listCollections %s: %w", s.cfg.Database, err)
	}
	if len(colls) == 0 {
		return l, fmt.Errorf("%w: collection %s does not exist: create it (db.createCollection(%q)) or fix source.mongo.collection",
			ErrNotAdmitted, s.ns, s.cfg.Collection)
	}
	c := colls[0]
	switch c.Type {
	case "", "collection":
	case "view":
		return l, fmt.Errorf("%w: %s is a view, which has no change stream; watch the collection it is defined on", ErrNotAdmitted, s.ns)
	case "timeseries":
		return l, fmt.Errorf("%w: %s is a time-series collection, which has no change stream", ErrNotAdmitted, s.ns)
	default:
		return l, fmt.Errorf("%w: %s is a %s, not a collection", ErrNotAdmitted, s.ns, c.Type)
	}
	if len(c.Info.UUID.Data) > 0 {
		l.collectionUUID = hex.EncodeToString(c.Info.UUID.Data)
	}
	l.prePostImages = c.Options.Images.Enabled
	if !l.prePostImages && (s.cfg.FullDocument == "when_available" || s.cfg.FullDocument == "required" || s.cfg.BeforeChange != "off") {
		if s.cfg.FullDocument == "required" || s.cfg.BeforeChange == "required" {
			return l, fmt.Errorf("%w: %s does not record pre- and post-images, which full_document/before_change \"required\" need: "+
				"run db.runCommand({collMod: %q, changeStreamPreAndPostImages: {enabled: true}})", ErrNotAdmitted, s.ns, s.cfg.Collection)
		}
		s.log.Warn("collection does not record pre- and post-images; images will be null", "namespace", s.ns)
	}
	return l, nil
}

// splitSupport reports the server's version and whether it has
// $changeStreamSplitLargeEvent: MongoDB 7.0 and later, and 6.0.9 and later
// 6.0 releases. A server that does not say is taken not to.
func (s *Source) splitSupport(ctx context.Context) (version string, ok bool) {
	var info struct {
		Version      string  `bson:"version"`
		VersionArray []int32 `bson:"versionArray"`
	}
	if err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		s.log.Info("buildInfo failed; not splitting large change events", "err", err)
		return "", false
	}
	v := info.VersionArray
	if len(v) < 3 {
		return info.Version, false
	}
	return info.Version, v[0] >= 7 || (v[0] == 6 && v[1] == 0 && v[2] >= 9)
}

func isCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

// identity builds the checkpoint identity for what admission found.
func (s *Source) identity(l live) map[string]string {
	m := map[string]string{
		"connector":       "mongo",
		"format_version":  formatVersion,
		"deployment_id":   l.deploymentID,
		"database":        s.cfg.Database,
		"collection":      s.cfg.Collection,
		"collection_uuid": l.collectionUUID,
		"stream_hash":     s.streamHash,
		splitKey:          strconv.FormatBool(s.split),
	}
	if s.multi != nil {
		inc, _ := json.Marshal(globTexts(s.multi.filter.include))
		exc, _ := json.Marshal(globTexts(s.multi.filter.exclude))
		m["collections"], m["exclude"] = string(inc), string(exc)
	}
	return m
}

// splitKey records in the identity whether the stream splits large
// events. It is not in identityKeys: a checkpoint written before Tide
// split events has no such field and is accepted, as is one written
// without splitting, since their tokens resume with or without the stage.
// A checkpoint written while splitting may hold a fragment's token, which
// the server resumes only with the stage, so it needs a splitting stream.
const splitKey = "split_large_events"

// streamHash is a SHA-256 of everything that changes what the stream
// returns: the pipeline in canonical form, both image modes, and expanded
// events.
func streamHash(canonicalPipeline []byte, fullDocument, beforeChange string) string {
	h := sha256.New()
	fmt.Fprintf(h, "pipeline=%s\nfull_document=%s\nbefore_change=%s\nshow_expanded_events=true\n",
		canonicalPipeline, fullDocument, beforeChange)
	return hex.EncodeToString(h.Sum(nil))
}

// checkIdentity compares a checkpoint's identity with the live one and
// names the first field that differs.
func checkIdentity(saved, now map[string]string) error {
	if len(saved) == 0 {
		return fmt.Errorf("%w: the checkpoint has no source identity (it was not written by a mongo source); %s", ErrIdentity, resetHint)
	}
	for _, k := range checkOrder {
		if saved[k] == now[k] {
			continue
		}
		why := ""
		switch k {
		case "connector":
			why = " (the checkpoint belongs to another kind of source)"
		case "deployment_id":
			why = " (the uri points at another replica set or cluster)"
		case "database", "collection", "collections", "exclude":
			why = " (the pipeline now names other collections)"
		case "collection_uuid":
			why = " (the collection was dropped and recreated, or renamed; to go on with the collection as it is now, " +
				"copying it again into the same output, re-snapshot: tide snapshot -f FILE)"
		case "stream_hash":
			why = " (pipeline, full_document or before_change changed)"
		}
		return fmt.Errorf("%w: %s is %s in the checkpoint but %s now%s; %s",
			ErrIdentity, k, quote(saved[k]), quote(now[k]), why, resetHint)
	}
	if saved[splitKey] == "true" && now[splitKey] != "true" {
		return fmt.Errorf("%w: %s is \"true\" in the checkpoint but %s now (the server no longer supports "+
			"$changeStreamSplitLargeEvent, which MongoDB 7.0, or 6.0.9 and later, has, and the checkpoint's token "+
			"may resume only with it); connect to a server that supports it, or %s",
			ErrIdentity, splitKey, quote(now[splitKey]), resetHint)
	}
	return nil
}

// sameLive reports why a reconnect found another deployment or
// collection, or "" when it is the same.
func sameLive(before, after live) string {
	switch {
	case before.deploymentID != after.deploymentID:
		return fmt.Sprintf("deployment_id changed from %s to %s", before.deploymentID, after.deploymentID)
	case before.collectionUUID != after.collectionUUID:
		return fmt.Sprintf("collection_uuid changed from %s to %s (dropped and recreated?)", before.collectionUUID, after.collectionUUID)
	}
	return ""
}
