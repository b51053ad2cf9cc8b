package mongowire

import (
	"context"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// withWriteConcernError adds a failCommand's writeConcernError to a
// command's reply, and the error labels mongod gives it: the fail point's
// own, or RetryableWriteError on a retryable write when the code is one a
// retry may cure (the drivers retry on that label alone).
func withWriteConcernError(reply []byte, act failAction) []byte {
	reply = appendDocField(reply, "writeConcernError", act.writeConcernErr)
	if _, err := bson.Raw(reply).LookupErr("errorLabels"); err == nil {
		return reply
	}
	var labels []string
	code, _ := act.writeConcernErr.Lookup("code").AsInt64OK()
	switch {
	case act.hasLabels:
		labels = act.errorLabels
	case act.retryableWrite && retryableCodes[int32(code)]:
		labels = []string{"RetryableWriteError"}
	}
	if len(labels) == 0 {
		return reply
	}
	arr := bson.A{}
	for _, l := range labels {
		arr = append(arr, l)
	}
	_, b, err := bson.MarshalValue(arr)
	if err != nil {
		return reply
	}
	return appendArrayField(reply, "errorLabels", b)
}

// onPrimaryTransactionalWrite is mongod's fail point of that name, which
// the retryable-writes tests use: on a retryable write it either fails the
// write, unapplied, with data.failBeforeCommitExceptionCode, or applies
// it (so that a retry finds it done); either way it then closes the
// connection without a reply unless data.closeConnection is false.
func (s *Server) onPrimaryTransactionalWrite(ctx context.Context, c *conn, r *request) (reply []byte, err error, handled bool) {
	if !isRetryableWrite(r) {
		return nil, nil, false
	}
	if sess, txn, ok := s.retryableSession(c, r.cmd); ok && sess.executed(txn) {
		return nil, nil, false // a retry finds the write done: mongod's fail point does not fire
	}
	act, ok := s.failpoints.matchPoint("onPrimaryTransactionalWrite", r, c.appName)
	if !ok {
		return nil, nil, false
	}
	if act.failBeforeCommit != 0 {
		if act.closeConnection {
			return nil, errCloseConn, true // unapplied, and the client sees only the closed connection
		}
		e := mongoerr.New(act.failBeforeCommit, "Failing write for test due to failpoint")
		if retryableCodes[act.failBeforeCommit] {
			e.Labels = []string{"RetryableWriteError"}
		}
		return s.errorReply(e), nil, true
	}
	if act.closeConnection {
		if _, err := s.runCommand(ctx, c, r); err != nil {
			return nil, err, true
		}
		return nil, errCloseConn, true
	}
	return nil, nil, false
}

// isRetryableWrite reports whether r is a retryable write: a write command
// with a txnNumber and outside a transaction.
func isRetryableWrite(r *request) bool {
	switch r.name {
	case "insert", "update", "delete", "findAndModify":
	default:
		return false
	}
	if _, ok := r.cmd.Lookup("txnNumber").Int64OK(); !ok {
		return false
	}
	_, err := r.cmd.LookupErr("autocommit")
	return err != nil
}

// appendArrayField appends {key: arr} to the BSON document doc.
func appendArrayField(doc []byte, key string, arr []byte) []byte {
	out := make([]byte, 0, len(doc)+len(key)+2+len(arr))
	out = append(out, doc[:len(doc)-1]...)
	out = append(out, 0x04)
	out = append(out, key...)
	out = append(out, 0)
	out = append(out, arr...)
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}
