package mongowire

import (
	"crypto/sha256"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// localSessions is the server's logical session cache as
// $listLocalSessions shows it: every session a command named by its lsid,
// with its user and last use, until it ends, is killed or stays unused
// 30 minutes.
type localSessions struct {
	mu        sync.Mutex // guards the fields below
	m         map[sessionKey]*localSession
	lastSweep time.Time
}

type localSession struct {
	id      bson.Binary
	user    string // "name@db"; "" without authentication
	lastUse time.Time
}

// sessionCommands end or kill the sessions their arguments name; as in
// mongod, their own lsid is not recorded as a session in use.
var sessionCommands = map[string]bool{
	"endSessions": true, "killSessions": true, "killAllSessions": true, "killAllSessionsByPattern": true,
}

// touchSession records the session a command names. A connection that
// has not authenticated to a server requiring it has no session: mongod
// has no uid to give one, and ignores the lsid of the few commands such a
// connection may run.
func (s *Server) touchSession(c *conn, r *request) {
	if sessionCommands[r.name] || s.cfg.Auth && (c == nil || c.auth.user == nil) {
		return
	}
	key, ok := s.sessionOf(c, r.cmd)
	if !ok {
		return
	}
	user := ""
	if s.cfg.Auth && key.uid == s.callerUID(c) {
		user = c.auth.user.User + "@" + c.auth.user.DB
	}
	ls := &s.local
	now := time.Now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[sessionKey]*localSession)
	}
	if now.Sub(ls.lastSweep) > time.Minute {
		ls.lastSweep = now
		for k, e := range ls.m {
			if now.Sub(e.lastUse) > sessionTimeout {
				delete(ls.m, k)
			}
		}
	}
	if e, ok := ls.m[key]; ok {
		e.lastUse = now
		return
	}
	sub, _, _ := r.cmd.Lookup("lsid", "id").BinaryOK()
	ls.m[key] = &localSession{id: bson.Binary{Subtype: sub, Data: []byte(key.id)}, user: user, lastUse: now}
}

// end forgets the sessions match selects.
func (ls *localSessions) end(match func(sessionKey) bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k := range ls.m {
		if match(k) {
			delete(ls.m, k)
		}
	}
}

// listSessionsSpec is the argument of $listLocalSessions: every user's
// sessions, or those of the users named (the caller's when none is).
type listSessionsSpec struct {
	all    bool
	users  map[[sha256.Size]byte]bool // by uid
	others bool                       // names a user other than the caller
}

// parseListSessions reads {allUsers, users: [{user, db}]} as mongod
// does. Listing another user's sessions needs the listSessions action
// (permitsAggregate checks it).
func (s *Server) parseListSessions(c *conn, v bson.RawValue) (listSessionsSpec, error) {
	const stage = "$listLocalSessions"
	spec, ok := v.DocumentOK()
	if !ok {
		return listSessionsSpec{}, typeMismatch(stage, "", v, "object")
	}
	a := &args{name: stage, cmd: spec}
	ls := listSessionsSpec{all: a.bool("allUsers"), users: map[[sha256.Size]byte]bool{}}
	users := a.docs("users")
	if a.err != nil {
		return listSessionsSpec{}, a.err
	}
	if ls.all && len(users) > 0 {
		return listSessionsSpec{}, mongoerr.New(mongoerr.UnsupportedFormat, "%s may not specify {allUsers:true} and {users:[...]} at the same time", stage)
	}
	me := s.callerUID(c)
	for _, u := range users {
		var name [2]string
		for i, f := range [2]string{"user", "db"} {
			fv, err := u.LookupErr(f)
			if err != nil {
				return listSessionsSpec{}, mongoerr.New(40414, "BSON field '%s.users.%s' is missing but a required field", stage, f)
			}
			str, ok := fv.StringValueOK()
			if !ok {
				return listSessionsSpec{}, typeMismatch(stage, "users."+f, fv, "string")
			}
			name[i] = str
		}
		uid := userUID(name[0], name[1])
		ls.users[uid] = true
		ls.others = ls.others || uid != me
	}
	if !ls.all && len(users) == 0 {
		ls.users[me] = true
	}
	return ls, nil
}

// listLocalSessionsStage answers a leading {$listLocalSessions: {allUsers,
// users}}: the caller's sessions by default, every one with allUsers, or
// those of the users listed.
func (s *Server) listLocalSessionsStage(c *conn, r *request, coll string, stages []bson.Raw) (docs []bson.Raw, ok bool, err error) {
	if len(stages) == 0 || stages[0].Index(0).Key() != "$listLocalSessions" {
		return nil, false, nil
	}
	if coll != "" {
		return nil, false, mongoerr.New(mongoerr.InvalidNamespace, "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection")
	}
	spec, err := s.parseListSessions(c, stages[0].Index(0).Value())
	if err != nil {
		return nil, false, err
	}
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	for k, e := range s.local.m {
		if !spec.all && !spec.users[k.uid] {
			continue
		}
		d := bson.D{
			{Key: "_id", Value: bson.D{{Key: "id", Value: e.id}, {Key: "uid", Value: bson.Binary{Data: k.uid[:]}}}},
			{Key: "lastUse", Value: bson.NewDateTimeFromTime(e.lastUse)},
		}
		if e.user != "" {
			d = append(d, bson.E{Key: "user", Value: bson.D{{Key: "name", Value: e.user}}})
		}
		b, err := bson.Marshal(d)
		if err != nil {
			return nil, false, err
		}
		docs = append(docs, b)
	}
	return docs, true, nil
}
