package mongowire

import (
	"maps"
	"math/bits"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// action is a set of privilege actions, one bit each, named as mongod
// names them. A privilege is a set of actions on a resource: a database
// (its non-system collections), every database, or the cluster.
type action uint64

const (
	actFind action = 1 << iota
	actInsert
	actUpdate
	actRemove
	actChangeStream
	actCreateCollection
	actDropCollection
	actCreateIndex
	actDropIndex
	actCollMod
	actCollStats
	actDBStats
	actListCollections
	actListIndexes
	actDropDatabase
	actRenameCollectionSameDB
	actEnableProfiler
	actValidate
	actKillAnyCursor
	actCreateUser
	actDropUser
	actGrantRole
	actRevokeRole
	actViewUser
	actViewRole
	actChangePassword
	actChangeCustomData
	actBypassDocumentValidation
	// cluster actions
	actListDatabases
	actServerStatus
	actReplSetGetConfig
	actReplSetGetStatus
	actGetCmdLineOpts
	actGetLog
	actGetParameter
	actHostInfo
	actInprog
	actGetDefaultRWConcern
	actKillAnySession
	actConfigureFailPoint
	actTop
	actListSessions
	actLast
)

var actionNames = [...]string{
	"find", "insert", "update", "remove", "changeStream", "createCollection", "dropCollection",
	"createIndex", "dropIndex", "collMod", "collStats", "dbStats", "listCollections", "listIndexes",
	"dropDatabase", "renameCollectionSameDB", "enableProfiler", "validate", "killAnyCursor",
	"createUser", "dropUser", "grantRole", "revokeRole", "viewUser", "viewRole", "changePassword",
	"changeCustomData", "bypassDocumentValidation", "listDatabases", "serverStatus", "replSetGetConfig", "replSetGetStatus",
	"getCmdLineOpts", "getLog", "getParameter", "hostInfo", "inprog", "getDefaultRWConcern",
	"killAnySession", "configureFailPoint", "top", "listSessions",
}

// names lists the actions of a, in bit order.
func (a action) names() bson.A {
	out := bson.A{}
	for a != 0 {
		i := bits.TrailingZeros64(uint64(a))
		out = append(out, actionNames[i])
		a &^= 1 << i
	}
	return out
}

const (
	readActions      = actFind | actChangeStream | actCollStats | actDBStats | actListCollections | actListIndexes
	readWriteActions = readActions | actInsert | actUpdate | actRemove | actCreateCollection | actDropCollection |
		actCreateIndex | actDropIndex | actRenameCollectionSameDB
	dbAdminActions = actCollMod | actCollStats | actCreateCollection | actCreateIndex | actDBStats | actDropCollection |
		actDropDatabase | actDropIndex | actEnableProfiler | actListCollections | actListIndexes |
		actRenameCollectionSameDB | actValidate | actBypassDocumentValidation
	userAdminActions = actCreateUser | actDropUser | actGrantRole | actRevokeRole | actViewUser | actViewRole |
		actChangePassword | actChangeCustomData
	// The cluster roles, as mongod divides them: listing every user's
	// sessions is monitoring (clusterMonitor, clusterManager), killing
	// them is host management (hostManager); clusterAdmin has all three.
	clusterMonitorActions = actListDatabases | actServerStatus | actReplSetGetConfig | actReplSetGetStatus |
		actGetCmdLineOpts | actGetLog | actGetParameter | actHostInfo | actInprog | actGetDefaultRWConcern | actTop |
		actListSessions
	clusterManagerActions = actReplSetGetConfig | actReplSetGetStatus | actGetDefaultRWConcern | actListSessions
	hostManagerActions    = actKillAnySession
	clusterAdminActions   = clusterMonitorActions | clusterManagerActions | hostManagerActions
)

// builtinRole is what one built-in role grants.
type builtinRole struct {
	db        action // on the role's own database
	anyDB     action // on every database but local and config
	cluster   action
	all       bool // root: everything, system collections included
	backup    bool // reads what mongodump reads beyond anyDB (backupNamespaces)
	restore   bool // mongorestore's user restore (_mergeAuthzCollections)
	adminOnly bool // exists only in the admin database
}

// backupNamespaces are the collections outside anyDB that the backup
// role reads, as mongod's does: the users and versions mongodump dumps,
// the oplog of --oplog, and local and config as a whole.
var backupNamespaces = map[string]bool{
	"admin.system.users": true, "admin.system.roles": true, "admin.system.version": true, "local.oplog.rs": true,
}

// builtinRoles are the roles this server knows; there are no custom roles.
var builtinRoles = map[string]builtinRole{
	"read":                 {db: readActions},
	"readWrite":            {db: readWriteActions},
	"dbAdmin":              {db: dbAdminActions},
	"userAdmin":            {db: userAdminActions},
	"readAnyDatabase":      {anyDB: readActions, cluster: actListDatabases, adminOnly: true},
	"readWriteAnyDatabase": {anyDB: readWriteActions, cluster: actListDatabases, adminOnly: true},
	"dbAdminAnyDatabase":   {anyDB: dbAdminActions, cluster: actListDatabases, adminOnly: true},
	"userAdminAnyDatabase": {anyDB: userAdminActions, cluster: actListDatabases, adminOnly: true},
	"clusterMonitor":       {cluster: clusterMonitorActions, adminOnly: true},
	"clusterManager":       {cluster: clusterManagerActions, adminOnly: true},
	"hostManager":          {cluster: hostManagerActions, anyDB: actKillAnyCursor, adminOnly: true},
	"clusterAdmin":         {cluster: clusterAdminActions, anyDB: actDropDatabase | actKillAnyCursor, adminOnly: true},
	"root":                 {all: true, adminOnly: true},
	// mongodump and mongorestore with least privilege.
	"backup": {anyDB: readActions, cluster: actListDatabases | actServerStatus | actGetParameter, backup: true, adminOnly: true},
	"restore": {anyDB: readWriteActions | actCollMod | actBypassDocumentValidation, cluster: actListDatabases | actGetParameter,
		restore: true, adminOnly: true},
}

// checkRole reports RoleNotFound for a role this server does not have.
func checkRole(r roleRef) error {
	br, ok := builtinRoles[r.Role]
	if !ok || (br.adminOnly && r.DB != "admin") || validDB(r.DB) != nil && r.DB != "admin" {
		return mongoerr.New(mongoerr.RoleNotFound, "Could not find role: %s@%s", r.Role, r.DB)
	}
	return nil
}

// privileges are a user's roles compiled for the checks of every
// command: a few masks and one map, read without locks or allocation.
type privileges struct {
	all     bool
	backup  bool // backupNamespaces readable
	restore bool // may merge users
	cluster action
	anyDB   action
	dbs     map[string]action
}

func compilePrivileges(roles []roleRef) *privileges {
	p := &privileges{dbs: map[string]action{}}
	for _, r := range roles {
		br, ok := builtinRoles[r.Role]
		if !ok {
			continue
		}
		p.all = p.all || br.all
		p.backup = p.backup || br.backup
		p.restore = p.restore || br.restore
		p.cluster |= br.cluster
		p.anyDB |= br.anyDB
		if br.db != 0 {
			p.dbs[r.DB] |= br.db
		}
	}
	return p
}

// on reports whether p grants every action of a on coll of db (coll ""
// is the database itself). System collections are root's alone.
func (p *privileges) on(a action, db, coll string) bool {
	if p == nil {
		return false
	}
	if p.all {
		return true
	}
	if p.backup && a&^readActions == 0 && (backupNamespaces[db+"."+coll] || db == "local" && coll == "" || db == "config" && !strings.HasPrefix(coll, "system.")) {
		return true
	}
	if strings.HasPrefix(coll, "system.") {
		return false
	}
	have := p.dbs[db]
	if db != "local" && db != "config" {
		have |= p.anyDB
	}
	return have&a == a
}

// onAllDatabases reports whether p grants a on every database, as a
// cluster-wide change stream needs.
func (p *privileges) onAllDatabases(a action) bool {
	return p != nil && (p.all || p.anyDB&a == a)
}

func (p *privileges) onCluster(a action) bool {
	return p != nil && (p.all || p.cluster&a == a)
}

// anyOn reports whether p grants anything on db: listDatabases shows
// such databases to a user without the listDatabases action.
func (p *privileges) anyOn(db string) bool {
	return p != nil && (p.all || p.dbs[db] != 0 || p.anyDB != 0 && db != "local" && db != "config")
}

// document renders p as connectionStatus's and usersInfo's privileges.
func (p *privileges) document() bson.A {
	out := bson.A{}
	res := func(db, coll string) bson.D { return bson.D{{Key: "db", Value: db}, {Key: "collection", Value: coll}} }
	if p.all {
		out = append(out, bson.D{{Key: "resource", Value: bson.D{{Key: "anyResource", Value: true}}}, {Key: "actions", Value: bson.A{"anyAction"}}})
		return out
	}
	if p.cluster != 0 {
		out = append(out, bson.D{{Key: "resource", Value: bson.D{{Key: "cluster", Value: true}}}, {Key: "actions", Value: p.cluster.names()}})
	}
	if p.anyDB != 0 {
		out = append(out, bson.D{{Key: "resource", Value: res("", "")}, {Key: "actions", Value: p.anyDB.names()}})
	}
	for _, db := range slices.Sorted(maps.Keys(p.dbs)) {
		out = append(out, bson.D{{Key: "resource", Value: res(db, "")}, {Key: "actions", Value: p.dbs[db].names()}})
	}
	return out
}

// parseRoles reads a roles array: each a role name in db, or {role, db}.
func parseRoles(cmd, field string, v bson.RawValue, db string) ([]roleRef, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(cmd, field, v, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "%s.%s: %v", cmd, field, err)
	}
	out := make([]roleRef, 0, len(vals))
	for _, e := range vals {
		var r roleRef
		switch e.Type {
		case bson.TypeString:
			r = roleRef{Role: e.StringValue(), DB: db}
		case bson.TypeEmbeddedDocument:
			d := e.Document()
			role, ok1 := d.Lookup("role").StringValueOK()
			rdb, ok2 := d.Lookup("db").StringValueOK()
			if !ok1 || !ok2 {
				return nil, mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects with \"role\" and \"db\" string fields")
			}
			r = roleRef{Role: role, DB: rdb}
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
		}
		if err := checkRole(r); err != nil {
			return nil, err
		}
		if !containsRole(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func containsRole(rs []roleRef, r roleRef) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func rolesDoc(rs []roleRef) bson.A {
	out := bson.A{}
	for _, r := range rs {
		out = append(out, bson.D{{Key: "role", Value: r.Role}, {Key: "db", Value: r.DB}})
	}
	return out
}
