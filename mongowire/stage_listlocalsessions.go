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
// with its user and last use, until endSessions or 30 minutes unused.
type localSessions struct {
	mu        sync.Mutex // guards the fields below
	m         map[string]*localSession
	lastSweep time.Time
}

type localSession struct {
	id      bson.Binary
	user    string // "name@db"; "" without authentication
	lastUse time.Time
}

// touch records the session of a command, or forgets those endSessions
// ends.
func (ls *localSessions) touch(c *conn, r *request) {
	if r.name == "endSessions" {
		arr, _ := r.cmd.Index(0).Value().ArrayOK()
		vals, _ := arr.Values()
		ls.mu.Lock()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				if _, data, ok := d.Lookup("id").BinaryOK(); ok {
					delete(ls.m, string(data))
				}
			}
		}
		ls.mu.Unlock()
		return
	}
	sub, data, ok := r.cmd.Lookup("lsid", "id").BinaryOK()
	if !ok {
		return
	}
	user := ""
	if c != nil && c.auth.user != nil {
		user = c.auth.user.User + "@" + c.auth.user.DB
	}
	now := time.Now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[string]*localSession)
	}
	if now.Sub(ls.lastSweep) > time.Minute {
		ls.lastSweep = now
		for k, e := range ls.m {
			if now.Sub(e.lastUse) > sessionTimeout {
				delete(ls.m, k)
			}
		}
	}
	if e, ok := ls.m[string(data)]; ok {
		e.lastUse = now
		return
	}
	ls.m[string(data)] = &localSession{id: bson.Binary{Subtype: sub, Data: []byte(string(data))}, user: user, lastUse: now}
}

// sessionUID is mongod's uid of a user: the SHA-256 of "name@db".
func sessionUID(user string) bson.Binary {
	sum := sha256.Sum256([]byte(user))
	return bson.Binary{Data: sum[:]}
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
	spec, isDoc := stages[0].Index(0).Value().DocumentOK()
	if !isDoc {
		return nil, false, typeMismatch("$listLocalSessions", "", stages[0].Index(0).Value(), "object")
	}
	a := &args{name: "$listLocalSessions", cmd: spec}
	all := a.bool("allUsers")
	users := a.docs("users")
	if a.err != nil {
		return nil, false, a.err
	}
	if all && len(users) > 0 {
		return nil, false, mongoerr.New(mongoerr.FailedToParse, "$listLocalSessions may not specify both allUsers and users")
	}
	want := map[string]bool{}
	switch {
	case len(users) > 0:
		for _, u := range users {
			want[u.Lookup("user").StringValue()+"@"+u.Lookup("db").StringValue()] = true
		}
	case !all:
		me := ""
		if c != nil && c.auth.user != nil {
			me = c.auth.user.User + "@" + c.auth.user.DB
		}
		want[me] = true
	}
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	for _, e := range s.local.m {
		if !all && !want[e.user] {
			continue
		}
		d := bson.D{
			{Key: "_id", Value: bson.D{{Key: "id", Value: e.id}, {Key: "uid", Value: sessionUID(e.user)}}},
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
