package mongowire

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// request is one command as dispatch sees it.
type request struct {
	name   string   // the command name: the first key of cmd
	db     string   // $db
	cmd    bson.Raw // the whole command, document sequences merged in
	legacy bool     // arrived as the OP_QUERY handshake
}

// commandFunc runs one command. The returned document is sent back with
// ok: 1, $clusterTime and operationTime appended; an error is sent as
// {ok: 0, errmsg, code, codeName}.
type commandFunc func(ctx context.Context, c *conn, r *request) (bson.D, error)

type command struct {
	run       commandFunc
	adminOnly bool // may only run against the admin database
	retryable bool // a retryable write: a repeated (lsid, txnNumber) gets the stored reply
	testOnly  bool // needs Config.EnableTestCommands
}

func (s *Server) commandTable() map[string]command {
	return map[string]command{
		// Sorted. One file per command (or per family of trivial ones).
		"abortTransaction":    {run: s.cmdAbortTransaction, adminOnly: true},
		"aggregate":           {run: s.cmdAggregate},
		"applyOps":            {run: s.cmdApplyOps},
		"authenticate":        {run: s.cmdAuthenticate},
		"buildInfo":           {run: s.cmdBuildInfo},
		"collMod":             {run: s.cmdCollMod},
		"collStats":           {run: s.cmdCollStats},
		"commitTransaction":   {run: s.cmdCommitTransaction, adminOnly: true},
		"configureFailPoint":  {run: s.cmdConfigureFailPoint, adminOnly: true, testOnly: true},
		"connectionStatus":    {run: s.cmdConnectionStatus},
		"count":               {run: s.cmdCount},
		"create":              {run: s.cmdCreate},
		"createIndexes":       {run: s.cmdCreateIndexes},
		"createSearchIndexes": {run: s.cmdSearchIndex},
		"createUser":          {run: s.cmdCreateUser},
		"currentOp":           {run: s.cmdCurrentOp, adminOnly: true},
		"_hashBSONElement":    {run: s.cmdHashBSONElement, testOnly: true},
		"dataSize":            {run: s.cmdDataSize},
		"dbStats":             {run: s.cmdDBStats},
		"delete":              {run: s.cmdDelete, retryable: true},
		"distinct":            {run: s.cmdDistinct},
		"drop":                {run: s.cmdDrop},
		"dropDatabase":        {run: s.cmdDropDatabase},
		"dropIndexes":         {run: s.cmdDropIndexes},
		"dropSearchIndex":     {run: s.cmdSearchIndex},
		"dropUser":            {run: s.cmdDropUser},
		"endSessions":         {run: s.cmdEndSessions},
		"explain":             {run: s.cmdExplain},
		"find":                {run: s.cmdFind},
		"findAndModify":       {run: s.cmdFindAndModify, retryable: true},
		"getCmdLineOpts":      {run: s.cmdGetCmdLineOpts, adminOnly: true},
		"getLog":              {run: s.cmdGetLog, adminOnly: true},
		"getMore":             {run: s.cmdGetMore},
		"getParameter":        {run: s.cmdGetParameter, adminOnly: true},
		"grantRolesToUser":    {run: s.cmdGrantRolesToUser},
		"hello":               {run: s.cmdHello},
		"hostInfo":            {run: s.cmdHostInfo},
		"insert":              {run: s.cmdInsert, retryable: true},
		"isMaster":            {run: s.cmdHello},
		"killAllSessions":     {run: s.cmdKillAllSessions},
		"killCursors":         {run: s.cmdKillCursors},
		"killSessions":        {run: s.cmdKillSessions},
		"listCollections":     {run: s.cmdListCollections},
		"listCommands":        {run: s.cmdListCommands},
		"listDatabases":       {run: s.cmdListDatabases, adminOnly: true},
		"listIndexes":         {run: s.cmdListIndexes},
		"logout":              {run: s.cmdLogout},
		"ping":                {run: s.cmdPing},
		"profile":             {run: s.cmdProfile},
		"renameCollection":    {run: s.cmdRenameCollection, adminOnly: true},
		"replSetGetConfig":    {run: s.cmdReplSetGetConfig, adminOnly: true},
		"replSetGetStatus":    {run: s.cmdReplSetGetStatus, adminOnly: true},
		"rolesInfo":           {run: s.cmdRolesInfo},
		"saslContinue":        {run: s.cmdSaslContinue},
		"saslStart":           {run: s.cmdSaslStart},
		"serverStatus":        {run: s.cmdServerStatus},
		"splitVector":         {run: s.cmdSplitVector},
		"update":              {run: s.cmdUpdate, retryable: true},
		"updateSearchIndex":   {run: s.cmdSearchIndex},
		"updateUser":          {run: s.cmdUpdateUser},
		"usersInfo":           {run: s.cmdUsersInfo},
		"validate":            {run: s.cmdValidate},
		"whatsmyuri":          {run: s.cmdWhatsMyURI},

		// mongod's Stable API test commands.
		"testDeprecation":  {run: s.cmdAPITest, testOnly: true},
		"testVersion1And2": {run: s.cmdAPITest, testOnly: true},
		"testVersion2":     {run: s.cmdAPITest, testOnly: true},

		// Apart, so that the long name leaves the alignment above alone.
		"getDefaultRWConcern": {run: s.cmdGetDefaultRWConcern, adminOnly: true},
		"revokeRolesFromUser": {run: s.cmdRevokeRolesFromUser},
		"top":                 {run: s.cmdTop, adminOnly: true},

		"dropAllUsersFromDatabase": {run: s.cmdDropAllUsersFromDatabase},
		"killAllSessionsByPattern": {run: s.cmdKillAllSessionsByPattern},
		"_mergeAuthzCollections":   {run: s.cmdMergeAuthzCollections, adminOnly: true},
	}
}

// dispatch runs one OP_MSG command and returns the reply document. An
// error return (a fail point's closeConnection) ends the connection.
// With a tracer, the command is a span.
func (s *Server) dispatch(ctx context.Context, c *conn, cmd bson.Raw) ([]byte, error) {
	if s.cfg.Tracer == nil {
		return s.dispatchCommand(ctx, c, cmd)
	}
	return s.tracedDispatch(ctx, c, cmd)
}

// dispatchCommand is dispatch without the span.
func (s *Server) dispatchCommand(ctx context.Context, c *conn, cmd bson.Raw) ([]byte, error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return s.errorReply(mongoerr.New(mongoerr.FailedToParse, "command document is empty")), nil
	}
	received := time.Now()
	r := &request{name: canonicalCommand(first.Key()), cmd: cmd}
	dbv, err := cmd.LookupErr("$db")
	if err != nil {
		return s.errorReply(mongoerr.New(40571, "OP_MSG requests require a $db argument")), nil
	}
	db, ok := dbv.StringValueOK()
	if !ok {
		return s.errorReply(typeMismatch(r.name, "$db", dbv, "string")), nil
	}
	r.db = db

	if s.cfg.EnableTestCommands {
		if act, ok := s.failpoints.match(r, c.appName); ok {
			if reply, err, handled := s.failCommand(ctx, act); handled {
				return reply, err
			}
			if act.writeConcernErr != nil {
				reply, err := s.runCommand(ctx, c, r)
				if err != nil {
					return nil, err
				}
				return withWriteConcernError(reply, act), nil
			}
		}
		if reply, err, handled := s.onPrimaryTransactionalWrite(ctx, c, r); handled {
			return reply, err
		}
	}
	if err := maxTime(r, received); err != nil {
		return s.errorReply(err), nil
	}
	reply, err := s.runCommand(ctx, c, r)
	s.top.record(r, time.Since(received))
	if berr := s.rawStore.Broken(); err == nil && berr != nil && !answersWhenBroken[r.name] {
		// The journal failed under this command: its reply would count
		// what it applied in memory, which a restart does not find.
		return s.errorReply(berr), nil
	}
	return reply, err
}

// runCommand looks up and runs r, turning every failure — a panic
// included — into an error reply. An error return ends the connection
// without a reply (a fail point's closeConnection).
func (s *Server) runCommand(ctx context.Context, c *conn, r *request) ([]byte, error) {
	name := r.name
	cmd, ok := s.commands[name]
	if !ok || (cmd.testOnly && !s.cfg.EnableTestCommands) {
		return s.errorReply(mongoerr.New(mongoerr.CommandNotFound, "no such command: '%s'", r.name)), nil
	}
	s.counters.count(r)
	if err := checkAPIParameters(name, r.cmd); err != nil {
		return s.errorReply(err), nil
	}
	if cmd.adminOnly && r.db != "admin" {
		return s.errorReply(mongoerr.New(mongoerr.Unauthorized, "%s may only be run against the admin database.", name)), nil
	}
	if err := s.authorize(c, r); err != nil {
		return s.errorReply(err), nil
	}
	if err := s.checkSessionUID(c, r.cmd); err != nil {
		return s.errorReply(err), nil
	}
	s.touchSession(c, r)
	if s.cfg.Auth && c.auth.user != nil { // cursors opened now belong to this user
		ctx = context.WithValue(ctx, cursorOwnerKey{}, c.auth.user.ID)
	}
	if err := s.rawStore.Broken(); err != nil && !answersWhenBroken[name] {
		return s.errorReply(err), nil
	}
	if fs, ok := commandFields[name]; ok {
		if err := fs.check(name, r.cmd, true); err != nil {
			return s.errorReply(err), nil
		}
	}
	if err := refuseUsersDDL(r); err != nil {
		return s.errorReply(err), nil
	}
	if err := refuseSystemWrite(r); err != nil {
		return s.errorReply(err), nil
	}
	if err := refuseOplogWrite(r); err != nil {
		return s.errorReply(err), nil
	}
	if err := s.refuseViewWrite(r); err != nil {
		return s.errorReply(err), nil
	}
	if err := s.commandHint(r); err != nil {
		return s.errorReply(err), nil
	}
	if err := checkCollation(r.cmd); err != nil {
		return s.errorReply(err), nil
	}
	if inTransaction(r.cmd) { // txn.go
		return s.runInTransaction(ctx, c, r, cmd)
	}
	if err := checkTxnNumber(r, cmd.retryable); err != nil {
		return s.errorReply(err), nil
	}
	if err := s.checkReadConcern(r); err != nil {
		return s.errorReply(err), nil
	}
	if cmd.retryable {
		if sess, txn, ok := s.retryableSession(c, r.cmd); ok {
			return s.runRetryable(ctx, c, r, cmd, sess, txn)
		}
	}
	reply, err := s.call(ctx, c, r, cmd.run)
	switch {
	case errors.Is(err, errCloseConn):
		return nil, err
	case err != nil:
		return s.errorReply(err), nil
	}
	return s.okReply(reply), nil
}

// answersWhenBroken are the commands a server whose journal failed still
// answers: the handshake and diagnostics, none that reads or writes data.
var answersWhenBroken = map[string]bool{
	"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true, "endSessions": true,
	"getLog": true, "serverStatus": true, "connectionStatus": true, "listCommands": true,
	"hostInfo": true, "whatsmyuri": true, "getParameter": true, "getCmdLineOpts": true,
	"saslStart": true, "saslContinue": true, "logout": true, "authenticate": true,
}

// call runs fn, converting a panic into an InternalError: a handler bug
// fails one command, never the server.
func (s *Server) call(ctx context.Context, c *conn, r *request, fn commandFunc) (reply bson.D, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("command panicked", "command", r.name, "panic", p, "stack", string(debug.Stack()))
			reply, err = nil, mongoerr.New(mongoerr.InternalError, "command %s failed with an internal error: %v", r.name, p)
		}
	}()
	reply, err = fn(ctx, c, r)
	inTxn := txnFrom(ctx) != nil // a statement of a transaction waits for nothing: its commit does
	if err == nil && writeConcernCommands[r.name] && !inTxn && journaled(r.cmd) {
		// Acknowledge only once the writes are on disk; concurrent
		// commands share the fsync.
		if err := s.rawStore.WaitDurable(); err != nil {
			return nil, err
		}
	}
	if err == nil && writeConcernCommands[r.name] && !inTxn {
		if wce := writeConcernError(r.cmd); wce != nil {
			reply = append(reply, bson.E{Key: "writeConcernError", Value: wce})
		}
	}
	return reply, err
}

// checkCollation parses every collation of a command (at its top, in its
// write statements, in the indexes it creates) before anything runs, so
// that a malformed or unsupported one fails with mongod's error (or
// CommandNotSupported for what x/text cannot do) and never runs binary.
func checkCollation(cmd bson.Raw) error {
	check := func(doc bson.Raw) (*mql.Collation, error) {
		v, err := doc.LookupErr("collation")
		if err != nil || v.Type == bson.TypeNull {
			return nil, nil
		}
		return mql.ParseCollation(v)
	}
	if _, err := check(cmd); err != nil {
		return err
	}
	for _, field := range [...]string{"updates", "deletes", "indexes"} { // indexes: createIndexes
		arr, ok := cmd.Lookup(field).ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				if _, err := check(d); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// collationArg is the collation a command or statement gives (Type 0
// when it gives none, and then the collection's default applies).
func collationArg(doc bson.Raw) bson.RawValue {
	v, err := doc.LookupErr("collation")
	if err != nil || v.Type == bson.TypeNull {
		return bson.RawValue{}
	}
	return v
}

// okReply appends ok: 1 and the cluster time to reply and encodes it.
func (s *Server) okReply(reply bson.D) []byte {
	reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	reply = s.appendClusterTime(reply)
	b, err := bson.Marshal(reply)
	if err != nil {
		return s.errorReply(fmt.Errorf("encode reply: %w", err))
	}
	return b
}

// errorReply encodes err as {ok: 0, errmsg, code, codeName} with any
// errorLabels and extra fields it carries. An error that is not a
// *mongoerr.Error is our bug and goes out as InternalError.
func (s *Server) errorReply(err error) []byte {
	e := dupKeyMessage(asMongoErr(err))
	d := bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.Message},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: e.CodeName},
	}
	if len(e.Labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: e.Labels})
	}
	d = append(d, e.Info...)
	d = s.appendClusterTime(d)
	b, merr := bson.Marshal(d)
	if merr != nil {
		b, _ = bson.Marshal(bson.D{
			{Key: "ok", Value: 0.0},
			{Key: "errmsg", Value: "encode error reply: " + merr.Error()},
			{Key: "code", Value: mongoerr.InternalError},
			{Key: "codeName", Value: mongoerr.Name(mongoerr.InternalError)},
		})
	}
	return b
}

func asMongoErr(err error) *mongoerr.Error {
	if e, ok := mongoerr.As(err); ok {
		return e
	}
	return mongoerr.New(mongoerr.InternalError, "%v", err)
}

var zeroSignature = bson.D{
	{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
	{Key: "keyId", Value: int64(0)},
}

// appendClusterTime adds $clusterTime and operationTime, both the store's
// newest cluster time: the one monotonic clock of the server.
func (s *Server) appendClusterTime(d bson.D) bson.D {
	if s.rawStore == nil {
		return d
	}
	ts := s.rawStore.ClusterTime()
	return append(d,
		bson.E{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: ts}, {Key: "signature", Value: zeroSignature}}},
		bson.E{Key: "operationTime", Value: ts},
	)
}
