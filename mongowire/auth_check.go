package mongowire

import (
	"context"
	"net"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Authorization: with Config.Auth, every command is checked against the
// caller's privileges before it runs. The privileges were compiled when
// the connection authenticated; a check is an atomic load (has any user
// changed?) and a few mask tests, never a recomputation.

// noAuthCommands run before authentication, as in mongod: the handshake
// and the conversation itself. endSessions is not one: as in mongod, a
// connection that has not authenticated has no session to end.
var noAuthCommands = map[string]bool{
	"hello": true, "isMaster": true, "buildInfo": true, "ping": true,
	"saslStart": true, "saslContinue": true, "authenticate": true, "logout": true,
	"connectionStatus": true,
}

// anyUserCommands run for any authenticated user: they reveal nothing
// that is not the caller's own, or checks inside them filter the answer.
var anyUserCommands = map[string]bool{
	"listCommands": true, "whatsmyuri": true, "rolesInfo": true,
	"_hashBSONElement": true, // a test command computing a hash: it reads no data
	"listDatabases":    true, // filtered to the caller's databases without the listDatabases action
	// A user's own sessions (cmd_sessions.go); naming another's by its
	// uid needs killAnySession, checked by killSessions.
	"endSessions": true, "killSessions": true,
	// A transaction's statements are checked one by one; ending it needs nothing more.
	"commitTransaction": true, "abortTransaction": true,
	// mongod's Stable API test commands (test commands only) do nothing.
	"testVersion2": true, "testVersion1And2": true, "testDeprecation": true,
	"applyOps": true, // each entry runs as its own command, checked as that command
}

// clusterCommands need one cluster action.
var clusterCommands = map[string]action{
	"serverStatus":        actServerStatus,
	"replSetGetConfig":    actReplSetGetConfig,
	"replSetGetStatus":    actReplSetGetStatus,
	"getCmdLineOpts":      actGetCmdLineOpts,
	"getLog":              actGetLog,
	"getParameter":        actGetParameter,
	"hostInfo":            actHostInfo,
	"currentOp":           actInprog,
	"getDefaultRWConcern": actGetDefaultRWConcern,
	"killAllSessions":     actKillAnySession,
	"configureFailPoint":  actConfigureFailPoint,
	"top":                 actTop,

	"killAllSessionsByPattern": actKillAnySession,
}

// collCommands need actions on the collection named by their first field.
var collCommands = map[string]action{
	"find":          actFind,
	"count":         actFind,
	"distinct":      actFind,
	"insert":        actInsert,
	"delete":        actRemove,
	"create":        actCreateCollection,
	"drop":          actDropCollection,
	"createIndexes": actCreateIndex,
	"dropIndexes":   actDropIndex,
	"collMod":       actCollMod,
	"collStats":     actCollStats,
	"listIndexes":   actListIndexes,
	"validate":      actValidate,

	"createSearchIndexes": actCreateIndex, // mongod has actions of their own, in the same built-in roles
	"updateSearchIndex":   actCreateIndex,
	"dropSearchIndex":     actDropIndex,
}

// dbCommands need actions on the database.
var dbCommands = map[string]action{
	"listCollections": actListCollections,
	"dbStats":         actDBStats,
	"dropDatabase":    actDropDatabase,
	"profile":         actEnableProfiler,
	"usersInfo":       0, // checked by the command: a user may always see itself
}

// privilegesOf returns the connection's privileges, recomputed if a user
// changed since they were computed; a dropped user is logged out.
func (s *Server) privilegesOf(c *conn) *privileges {
	a := &c.auth
	if a.user == nil {
		return nil
	}
	if gen := s.auth.gen.Load(); gen != a.gen {
		a.gen = gen
		u := s.lookupUser(a.user.DB, a.user.User)
		if u == nil {
			a.user, a.privs = nil, nil
			return nil
		}
		a.user, a.privs = u, compilePrivileges(u.Roles)
	}
	return a.privs
}

// authorize refuses r unless the connection may run it: 13 Unauthorized.
func (s *Server) authorize(c *conn, r *request) error {
	if !s.cfg.Auth || noAuthCommands[r.name] || r.name == "ismaster" {
		return nil
	}
	p := s.privilegesOf(c)
	if p == nil {
		if s.localhostException(c, r) {
			return nil
		}
		return mongoerr.New(mongoerr.Unauthorized, "Command %s requires authentication", r.name)
	}
	if p.all || anyUserCommands[r.name] {
		return nil
	}
	if s.permits(p, r) && permitsBypass(p, r) && s.permitsListSessions(c, p, r) {
		return nil
	}
	return unauthorized(r)
}

// permitsListSessions: any user may list its own sessions with
// $listLocalSessions; every user's, or another user's, need the
// listSessions action, as on mongod.
func (s *Server) permitsListSessions(c *conn, p *privileges, r *request) bool {
	cmd := r.cmd
	if r.name == "explain" {
		cmd, _ = cmd.Index(0).Value().DocumentOK()
	}
	if first, err := cmd.IndexErr(0); err != nil || first.Key() != "aggregate" {
		return true
	}
	arr, _ := cmd.Lookup("pipeline").ArrayOK()
	stages := arrayDocs(arr)
	if len(stages) == 0 {
		return true
	}
	first, err := stages[0].IndexErr(0)
	if err != nil || first.Key() != "$listLocalSessions" {
		return true
	}
	spec, err := s.parseListSessions(c, first.Value())
	if err != nil {
		return true // the command reports it
	}
	return !spec.all && !spec.others || p.onCluster(actListSessions)
}

// localhostException lets a client on the loopback interface create the
// first user, in admin, while there is none, as mongod does; nothing else.
func (s *Server) localhostException(c *conn, r *request) bool {
	if r.name != "createUser" || r.db != "admin" || s.hasUsers() || c == nil || c.remoteAddr == nil {
		return false
	}
	tcp, ok := c.remoteAddr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// permits reports whether p allows r.
func (s *Server) permits(p *privileges, r *request) bool {
	if a, ok := clusterCommands[r.name]; ok {
		return p.onCluster(a)
	}
	if a, ok := dbCommands[r.name]; ok {
		return a == 0 || p.on(a, r.db, "")
	}
	coll, _ := r.cmd.Index(0).Value().StringValueOK()
	if a, ok := collCommands[r.name]; ok {
		return p.on(a, r.db, coll)
	}
	switch r.name {
	case "getMore", "killCursors": // cursor ownership is checked by the command
		return true
	case "update":
		return p.on(actUpdate|upsertAction(r.cmd, "updates"), r.db, coll)
	case "findAndModify":
		a := actFind | actUpdate
		if v, err := r.cmd.LookupErr("remove"); err == nil && truthy(v) {
			a = actFind | actRemove
		}
		if v, err := r.cmd.LookupErr("upsert"); err == nil && truthy(v) {
			a |= actInsert
		}
		return p.on(a, r.db, coll)
	case "aggregate":
		return s.permitsAggregate(p, r)
	case "explain":
		inner, ok := r.cmd.Index(0).Value().DocumentOK()
		if !ok {
			return true // the command reports the type mismatch
		}
		first, err := inner.IndexErr(0)
		if err != nil || first.Key() == "explain" {
			return true
		}
		return s.permits(p, &request{name: canonicalCommand(first.Key()), db: r.db, cmd: inner})
	case "renameCollection":
		from, _ := r.cmd.Index(0).Value().StringValueOK()
		to, _ := r.cmd.Lookup("to").StringValueOK()
		fdb, fcoll, _ := strings.Cut(from, ".")
		tdb, tcoll, _ := strings.Cut(to, ".")
		if fdb == tdb {
			return p.on(actRenameCollectionSameDB, fdb, fcoll) && p.on(actRenameCollectionSameDB, tdb, tcoll)
		}
		return p.on(actFind|actDropCollection, fdb, fcoll) && p.on(actInsert|actCreateCollection|actCreateIndex, tdb, tcoll)
	case "createUser":
		return p.on(actCreateUser, r.db, "") && s.mayGrant(p, r, "roles")
	case "updateUser":
		need := action(0)
		if _, err := r.cmd.LookupErr("pwd"); err == nil {
			need |= actChangePassword
		}
		if _, err := r.cmd.LookupErr("customData"); err == nil {
			need |= actChangeCustomData
		}
		if _, err := r.cmd.LookupErr("roles"); err == nil {
			need |= actRevokeRole
			if !s.mayGrant(p, r, "roles") {
				return false
			}
		}
		return p.on(need, r.db, "")
	case "dataSize", "splitVector": // a full namespace; mongod asks find for dataSize, its splitVector action for splitVector
		full, _ := r.cmd.Index(0).Value().StringValueOK()
		db, coll, _ := strings.Cut(full, ".")
		return r.name == "dataSize" && p.on(actFind, db, coll)
	case "_mergeAuthzCollections": // mongorestore's user restore writes users of any database: root and restore
		return p.restore
	case "dropUser", "dropAllUsersFromDatabase":
		return p.on(actDropUser, r.db, "")
	case "grantRolesToUser":
		return s.mayGrant(p, r, "roles")
	case "revokeRolesFromUser":
		return s.mayRevoke(p, r)
	}
	return false
}

// upsertAction is actInsert if any statement of field upserts.
func upsertAction(cmd bson.Raw, field string) action {
	arr, ok := cmd.Lookup(field).ArrayOK()
	if !ok {
		return 0
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok && truthy(d.Lookup("upsert")) {
			return actInsert
		}
	}
	return 0
}

// mayGrant: granting a role needs grantRole on the role's database.
func (s *Server) mayGrant(p *privileges, r *request, field string) bool {
	v, err := r.cmd.LookupErr(field)
	if err != nil {
		return true // the command reports the missing field
	}
	roles, err := parseRoles(r.name, field, v, r.db)
	if err != nil {
		return true // the command reports the bad role
	}
	for _, role := range roles {
		if !p.on(actGrantRole, role.DB, "") {
			return false
		}
	}
	return true
}

func (s *Server) mayRevoke(p *privileges, r *request) bool {
	v, err := r.cmd.LookupErr("roles")
	if err != nil {
		return true
	}
	roles, err := parseRoles(r.name, "roles", v, r.db)
	if err != nil {
		return true
	}
	for _, role := range roles {
		if !p.on(actRevokeRole, role.DB, "") {
			return false
		}
	}
	return true
}

// permitsAggregate checks a pipeline: find on the source; a change stream
// needs find and changeStream on its collection, its database, or (for a
// cluster-wide stream) on every database; $out and $merge need writes on
// their target, $lookup, $graphLookup and $unionWith find on theirs.
func (s *Server) permitsAggregate(p *privileges, r *request) bool {
	coll, _ := r.cmd.Index(0).Value().StringValueOK()
	arr, ok := r.cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return p.on(actFind, r.db, coll)
	}
	stages := arrayDocs(arr)
	if len(stages) > 0 && stages[0].Index(0).Key() == "$changeStream" {
		spec, _ := stages[0].Index(0).Value().DocumentOK()
		if truthy(spec.Lookup("allChangesForCluster")) {
			if !p.onAllDatabases(actFind | actChangeStream) {
				return false
			}
		} else if !p.on(actFind|actChangeStream, r.db, coll) {
			return false
		}
		return permitsStages(p, r.db, stages[1:])
	}
	if len(stages) > 0 && stages[0].Index(0).Key() == "$currentOp" {
		return p.onCluster(actInprog)
	}
	if len(stages) > 0 && stages[0].Index(0).Key() == "$listLocalSessions" && coll == "" {
		return permitsStages(p, r.db, stages[1:]) // and permitsListSessions
	}
	if len(stages) > 0 && stages[0].Index(0).Key() == "$collStats" {
		return p.on(actCollStats, r.db, coll) && permitsStages(p, r.db, stages[1:])
	}
	return p.on(actFind, r.db, coll) && permitsStages(p, r.db, stages)
}

// permitsStages checks the namespaces a pipeline's stages read or write,
// sub-pipelines included.
func permitsStages(p *privileges, db string, stages []bson.Raw) bool {
	for _, st := range stages {
		e, err := st.IndexErr(0)
		if err != nil {
			continue
		}
		v := e.Value()
		switch e.Key() {
		case "$out":
			to, err := outTarget(db, v)
			if err == nil && !p.on(actInsert|actRemove, to.DB, to.Coll) {
				return false
			}
		case "$merge":
			m, err := parseMerge(db, v)
			if err == nil && !p.on(actInsert|actUpdate, m.into.DB, m.into.Coll) {
				return false
			}
		case "$lookup", "$graphLookup", "$unionWith":
			var (
				from string
				sub  bson.RawArray
			)
			if str, ok := v.StringValueOK(); ok { // $unionWith: "c"
				from = str
			} else if d, ok := v.DocumentOK(); ok {
				from, _ = d.Lookup("from").StringValueOK()
				if from == "" {
					from, _ = d.Lookup("coll").StringValueOK()
				}
				sub, _ = d.Lookup("pipeline").ArrayOK()
			}
			if from != "" && !p.on(actFind, db, from) {
				return false
			}
			if sub != nil && !permitsStages(p, db, arrayDocs(sub)) {
				return false
			}
		case "$facet":
			d, _ := v.DocumentOK()
			elems, _ := d.Elements()
			for _, fe := range elems {
				if arr, ok := fe.Value().ArrayOK(); ok && !permitsStages(p, db, arrayDocs(arr)) {
					return false
				}
			}
		}
	}
	return true
}

func arrayDocs(arr bson.RawArray) []bson.Raw {
	vals, _ := arr.Values()
	out := make([]bson.Raw, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out
}

// unauthorized is mongod's refusal: "not authorized on DB to execute
// command { ... }", the command shown with its fields' values.
func unauthorized(r *request) error {
	return mongoerr.New(mongoerr.Unauthorized, "not authorized on %s to execute command %s", r.db, commandString(r.cmd))
}

// commandString renders cmd as mongod's logs do, { name: value, ... },
// with long values cut short and passwords left out.
func commandString(cmd bson.Raw) string {
	elems, _ := cmd.Elements()
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Key())
		b.WriteString(": ")
		if e.Key() == "pwd" || e.Key() == "payload" {
			b.WriteString(`"###"`)
			continue
		}
		v := e.Value().String()
		if len(v) > 200 {
			v = v[:200] + "..."
		}
		b.WriteString(v)
	}
	b.WriteString(" }")
	return b.String()
}

// cursorOwnerKey carries the authenticated user's id to openCursor, so
// that the cursor records its owner.
type cursorOwnerKey struct{}

func cursorOwner(ctx context.Context) string {
	id, _ := ctx.Value(cursorOwnerKey{}).(string)
	return id
}

// checkCursorOwner refuses a getMore or killCursors of a cursor another
// user opened, as mongod: 13.
func (s *Server) checkCursorOwner(ctx context.Context, cur *cursor) error {
	if !s.cfg.Auth || cur.owner == cursorOwner(ctx) {
		return nil
	}
	return mongoerr.New(mongoerr.Unauthorized, "cursor id %d was not created by the authenticated user", cur.id)
}

// usersDDLCommands would change admin.system.users other than through
// the user commands.
var usersDDLCommands = map[string]bool{"create": true, "drop": true, "createIndexes": true, "dropIndexes": true, "collMod": true}

// refuseUsersDDL keeps admin.system.users to the user commands, whoever
// asks: no drop, rename, index or option change, and no drop of the admin
// database that holds it.
func refuseUsersDDL(r *request) error {
	refuse := func() error {
		return mongoerr.New(mongoerr.InvalidNamespace, "cannot write to '%s'", usersNS)
	}
	switch {
	case usersDDLCommands[r.name] && r.db == usersNS.DB:
		if coll, _ := r.cmd.Index(0).Value().StringValueOK(); coll == usersNS.Coll {
			return refuse()
		}
	case r.name == "renameCollection":
		from, _ := r.cmd.Index(0).Value().StringValueOK()
		to, _ := r.cmd.Lookup("to").StringValueOK()
		if from == usersNS.String() || to == usersNS.String() {
			return refuse()
		}
	case r.name == "dropDatabase" && r.db == "admin":
		return mongoerr.New(mongoerr.IllegalOperation, "Dropping the 'admin' database is prohibited.")
	}
	return nil
}

// permitsBypass: a write with bypassDocumentValidation: true needs the
// bypassDocumentValidation action on its collection (dbAdmin and restore
// grant it, readWrite does not), as on mongod.
func permitsBypass(p *privileges, r *request) bool {
	switch r.name {
	case "insert", "update", "findAndModify", "aggregate":
	default:
		return true
	}
	v, err := r.cmd.LookupErr("bypassDocumentValidation")
	if err != nil || !truthy(v) {
		return true
	}
	coll, _ := r.cmd.Index(0).Value().StringValueOK()
	return p.on(actBypassDocumentValidation, r.db, coll)
}
