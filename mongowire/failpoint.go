package mongowire

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// failPoint is the configuration of one named fail point, as
// configureFailPoint sets it.
type failPoint struct {
	mode      string // "alwaysOn", "times", "skip", "off"
	remaining int64  // times: activations left; skip: matches to let pass
	entered   int64  // activations so far

	commands         []string
	errorCode        int32
	errorLabels      []string
	hasLabels        bool
	closeConnection  bool
	blockTime        time.Duration
	appName          string
	namespace        string
	writeConcernErr  bson.Raw // replied after running the command
	failBeforeCommit int32    // onPrimaryTransactionalWrite: fail the write with this code, unapplied
}

// failPoints holds the fail points (test commands only).
type failPoints struct {
	mu     sync.Mutex // guards the field below
	points map[string]*failPoint
}

// failAction is what a matched fail point does to one command.
type failAction struct {
	name             string // the command failed
	errorCode        int32
	errorLabels      []string
	hasLabels        bool
	closeConnection  bool
	blockTime        time.Duration
	retryableWrite   bool
	txnStatement     bool // a statement of a transaction other than its commit or abort (txn.go)
	writeConcernErr  bson.Raw
	failBeforeCommit int32
}

// match reports whether failCommand applies to r, and consumes one
// activation if so.
func (f *failPoints) match(r *request, appName string) (failAction, bool) {
	return f.matchPoint("failCommand", r, appName)
}

func (f *failPoints) matchPoint(point string, r *request, appName string) (failAction, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.points[point]
	if fp == nil || fp.mode == "off" || r.name == "configureFailPoint" {
		return failAction{}, false
	}
	if point == "failCommand" && !contains(fp.commands, r.name) {
		return failAction{}, false
	}
	if appName == "" && (r.name == "hello" || r.name == "isMaster" || r.name == "ismaster") {
		// A connection's first hello names the application it is for.
		appName, _ = r.cmd.Lookup("client", "application", "name").StringValueOK()
	}
	if fp.appName != "" && fp.appName != appName {
		return failAction{}, false
	}
	if fp.namespace != "" {
		coll, _ := r.cmd.Index(0).Value().StringValueOK()
		if fp.namespace != r.db+"."+coll {
			return failAction{}, false
		}
	}
	switch fp.mode {
	case "skip":
		if fp.remaining > 0 {
			fp.remaining--
			return failAction{}, false
		}
	case "times":
		if fp.remaining <= 0 {
			return failAction{}, false
		}
		fp.remaining--
		if fp.remaining == 0 {
			fp.mode = "off"
		}
	}
	fp.entered++
	_, hasTxn := r.cmd.Lookup("txnNumber").Int64OK()
	return failAction{
		name:             r.name,
		errorCode:        fp.errorCode,
		errorLabels:      fp.errorLabels,
		hasLabels:        fp.hasLabels,
		closeConnection:  fp.closeConnection,
		blockTime:        fp.blockTime,
		writeConcernErr:  fp.writeConcernErr,
		failBeforeCommit: fp.failBeforeCommit,
		retryableWrite:   hasTxn && (r.name == "insert" || r.name == "update" || r.name == "delete" || r.name == "findAndModify"),
	}.inTransaction(r), true
}

// retryableCodes get the RetryableWriteError label on a retryable write
// when the fail point names no labels, as mongod labels them.
var retryableCodes = map[int32]bool{
	6: true, 7: true, 89: true, 91: true, 189: true, 262: true, 9001: true, 10107: true,
	11600: true, 11602: true, 13435: true, 13436: true, 63: true, 150: true, 13388: true, 134: true,
}

// failCommand applies a matched fail point: block, then close the
// connection or fail with the configured error. handled is false when the
// fail point only blocks, and the command then runs normally.
func (s *Server) failCommand(ctx context.Context, act failAction) (reply []byte, err error, handled bool) {
	if act.blockTime > 0 {
		t := time.NewTimer(act.blockTime)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, errCloseConn, true
		}
	}
	if act.closeConnection {
		return nil, errCloseConn, true
	}
	if act.errorCode == 0 {
		return nil, nil, false // block only, or a writeConcernError added after the command runs
	}
	e := mongoerr.New(act.errorCode, "Failing command %s via 'failCommand' failpoint", act.name)
	if act.hasLabels {
		e.Labels = act.errorLabels
	} else {
		e.Labels = act.defaultLabels()
	}
	return s.errorReply(e), nil, true
}

// cmdConfigureFailPoint: {configureFailPoint: name, mode: "alwaysOn" |
// "off" | {times: n} | {skip: n}, data: {...}} -> {count: <activations
// of the previous configuration>}.
func (s *Server) cmdConfigureFailPoint(_ context.Context, _ *conn, r *request) (bson.D, error) {
	name, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok || (name != "failCommand" && name != "failGetMoreAfterCursorCheckout" && name != "onPrimaryTransactionalWrite") {
		return nil, mongoerr.New(mongoerr.BadValue, "unknown fail point %s (supported: failCommand, failGetMoreAfterCursorCheckout, onPrimaryTransactionalWrite)", r.cmd.Index(0).Value())
	}
	// onPrimaryTransactionalWrite closes the connection unless told not
	// to, as mongod's does.
	fp := &failPoint{closeConnection: name == "onPrimaryTransactionalWrite"}
	mode, err := r.cmd.LookupErr("mode")
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: missing mode")
	}
	switch mode.Type {
	case bson.TypeString:
		fp.mode = mode.StringValue()
		if fp.mode != "alwaysOn" && fp.mode != "off" {
			return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: unknown mode %q", fp.mode)
		}
	case bson.TypeEmbeddedDocument:
		m := mode.Document()
		if v, err := m.LookupErr("times"); err == nil {
			n, err := asInt64("configureFailPoint", "mode.times", v)
			if err != nil || n < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: mode.times must be a non-negative number")
			}
			fp.mode, fp.remaining = "times", n
			if n == 0 {
				fp.mode = "off"
			}
		} else if v, err := m.LookupErr("skip"); err == nil {
			n, err := asInt64("configureFailPoint", "mode.skip", v)
			if err != nil || n < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: mode.skip must be a non-negative number")
			}
			fp.mode, fp.remaining = "skip", n
		} else {
			return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: mode must be alwaysOn, off, {times: n} or {skip: n}")
		}
	default:
		return nil, typeMismatch("configureFailPoint", "mode", mode, "string or object")
	}
	if data, ok := r.cmd.Lookup("data").DocumentOK(); ok {
		a := &args{name: "configureFailPoint.data", cmd: data}
		if v, ok := a.lookup("failCommands"); ok {
			arr, ok := v.ArrayOK()
			if !ok {
				return nil, typeMismatch("configureFailPoint", "data.failCommands", v, "array")
			}
			vals, _ := arr.Values()
			for _, c := range vals {
				if n, ok := c.StringValueOK(); ok {
					fp.commands = append(fp.commands, n)
				}
			}
		}
		if n, ok := a.int64("errorCode"); ok {
			fp.errorCode = int32(n)
		}
		if v, ok := a.lookup("errorLabels"); ok {
			arr, ok := v.ArrayOK()
			if !ok {
				return nil, typeMismatch("configureFailPoint", "data.errorLabels", v, "array")
			}
			fp.hasLabels = true
			fp.errorLabels = []string{}
			vals, _ := arr.Values()
			for _, l := range vals {
				if n, ok := l.StringValueOK(); ok {
					fp.errorLabels = append(fp.errorLabels, n)
				}
			}
		}
		if _, ok := a.lookup("closeConnection"); ok {
			fp.closeConnection = a.bool("closeConnection")
		}
		if a.bool("blockConnection") {
			ms, _ := a.int64("blockTimeMS")
			fp.blockTime = time.Duration(ms) * time.Millisecond
		}
		fp.writeConcernErr = a.doc("writeConcernError")
		if n, ok := a.int64("failBeforeCommitExceptionCode"); ok {
			fp.failBeforeCommit = int32(n)
		}
		fp.appName, _ = a.string("appName")
		fp.namespace, _ = a.string("namespace")
		if a.err != nil {
			return nil, a.err
		}
		if name == "failCommand" && len(fp.commands) == 0 && fp.mode != "off" {
			return nil, mongoerr.New(mongoerr.BadValue, "configureFailPoint: failCommand needs data.failCommands")
		}
	}
	s.failpoints.mu.Lock()
	if s.failpoints.points == nil {
		s.failpoints.points = make(map[string]*failPoint)
	}
	var count int64
	if old := s.failpoints.points[name]; old != nil {
		count = old.entered
	}
	s.failpoints.points[name] = fp
	s.failpoints.mu.Unlock()
	return bson.D{{Key: "count", Value: count}}, nil
}

// appendDocField appends {key: sub} to the BSON document doc.
func appendDocField(doc []byte, key string, sub []byte) []byte {
	out := make([]byte, 0, len(doc)+len(key)+2+len(sub))
	out = append(out, doc[:len(doc)-1]...)
	out = append(out, 0x03)
	out = append(out, key...)
	out = append(out, 0)
	out = append(out, sub...)
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}
