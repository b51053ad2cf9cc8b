package mongowire

import (
	"context"
	"crypto/sha256"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Ending and killing sessions. A session belongs to the user who runs it
// (sessionKey): endSessions and killSessions name sessions by id, which
// means the caller's own; naming another user's by its uid, as
// $listLocalSessions shows it, needs the killAnySession action, and so do
// killAllSessions and killAllSessionsByPattern.

// endSessions forgets the sessions match selects, with their
// retryable-write records, and aborts their transactions.
func (s *Server) endSessions(match func(sessionKey) bool) {
	s.sessions.end(match)
	s.local.end(match)
	s.txns.abortSessions(match)
}

func anySession(sessionKey) bool { return true }

// namedSessions reads the command's list of lsids ({id, uid?}) as
// sessions of the caller, nil for an empty list. A uid other than the
// caller's is refused with 13 unless killAny is set and the caller has the
// killAnySession action, as mongod.
func (s *Server) namedSessions(c *conn, r *request, killAny bool) (map[sessionKey]bool, error) {
	v := r.cmd.Index(0).Value()
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(r.name, r.name, v, "array")
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil, nil
	}
	me := s.callerUID(c)
	want := make(map[sessionKey]bool, len(vals))
	for _, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			continue
		}
		_, id, ok := d.Lookup("id").BinaryOK()
		if !ok {
			continue
		}
		k := sessionKey{uid: me, id: string(id)}
		if uid, err := d.LookupErr("uid"); err == nil {
			if !s.mayNameUID(c, uid, killAny) {
				return nil, mongoerr.New(mongoerr.Unauthorized, "Unauthorized to set user digest in LogicalSessionId")
			}
			_, data, ok := uid.BinaryOK()
			if !ok || len(data) != sha256.Size {
				continue // names no session
			}
			copy(k.uid[:], data)
		}
		want[k] = true
	}
	return want, nil
}

// cmdEndSessions ends the caller's sessions named: another user's id
// names a session of the caller's, which is none.
func (s *Server) cmdEndSessions(_ context.Context, c *conn, r *request) (bson.D, error) {
	want, err := s.namedSessions(c, r, false)
	if err != nil {
		return nil, err
	}
	s.endSessions(func(k sessionKey) bool { return want[k] })
	return bson.D{}, nil
}

// cmdKillSessions kills the sessions named, or all of the caller's.
func (s *Server) cmdKillSessions(_ context.Context, c *conn, r *request) (bson.D, error) {
	want, err := s.namedSessions(c, r, true)
	if err != nil {
		return nil, err
	}
	if want == nil { // killSessions: [] kills all the caller's sessions
		me := s.callerUID(c)
		s.endSessions(func(k sessionKey) bool { return !s.cfg.Auth || k.uid == me })
		return bson.D{}, nil
	}
	s.endSessions(func(k sessionKey) bool { return want[k] })
	return bson.D{}, nil
}

// cmdKillAllSessions kills every session, or every session of the users
// listed ([{user, db}]). The killAnySession action was checked.
func (s *Server) cmdKillAllSessions(_ context.Context, _ *conn, r *request) (bson.D, error) {
	a := &args{name: r.name, cmd: r.cmd}
	users := a.docs(r.name)
	if a.err != nil {
		return nil, a.err
	}
	if len(users) == 0 {
		s.endSessions(anySession)
		return bson.D{}, nil
	}
	uids := map[[sha256.Size]byte]bool{}
	for _, u := range users {
		var name [2]string
		for i, f := range [2]string{"user", "db"} {
			fv, err := u.LookupErr(f)
			if err != nil {
				return nil, mongoerr.New(40414, "BSON field 'KillAllSessionsUser.%s' is missing but a required field", f)
			}
			str, ok := fv.StringValueOK()
			if !ok {
				return nil, typeMismatch("KillAllSessionsUser", f, fv, "string")
			}
			name[i] = str
		}
		uids[userUID(name[0], name[1])] = true
	}
	s.endSessions(func(k sessionKey) bool { return uids[k.uid] })
	return bson.D{}, nil
}

// cmdKillAllSessionsByPattern kills the sessions any pattern matches:
// {lsid: {id, uid}}, {uid}, or {} and an empty list for all of them. A
// pattern's users and roles say whom to kill as (mongos forwards them),
// which needs mongod's impersonate action: no role here grants it. The
// killAnySession action was checked.
func (s *Server) cmdKillAllSessionsByPattern(_ context.Context, _ *conn, r *request) (bson.D, error) {
	const item = "KillAllSessionsByPattern"
	a := &args{name: r.name, cmd: r.cmd}
	docs := a.docs(r.name)
	if a.err != nil {
		return nil, a.err
	}
	type pattern struct {
		uid *[sha256.Size]byte // nil: any
		id  *string            // nil: any
	}
	var patterns []pattern
	for _, d := range docs {
		if s.cfg.Auth {
			for _, f := range [...]string{"users", "roles"} {
				if _, err := d.LookupErr(f); err == nil {
					return nil, mongoerr.New(mongoerr.Unauthorized, "Not authorized to impersonate in killAllSessionsByPattern")
				}
			}
		}
		var p pattern
		if v, err := d.LookupErr("uid"); err == nil {
			uid, err := sessionUIDField(item, "uid", v)
			if err != nil {
				return nil, err
			}
			p.uid = &uid
		}
		if v, err := d.LookupErr("lsid"); err == nil {
			lsid, ok := v.DocumentOK()
			if !ok {
				return nil, typeMismatch(item, "lsid", v, "object")
			}
			idv, err := lsid.LookupErr("id")
			if err != nil {
				return nil, mongoerr.New(40414, "BSON field '%s.lsid.id' is missing but a required field", item)
			}
			_, id, ok := idv.BinaryOK()
			if !ok {
				return nil, typeMismatch(item, "lsid.id", idv, "binData")
			}
			uidv, err := lsid.LookupErr("uid")
			if err != nil {
				return nil, mongoerr.New(40414, "BSON field '%s.lsid.uid' is missing but a required field", item)
			}
			uid, err := sessionUIDField(item, "lsid.uid", uidv)
			if err != nil {
				return nil, err
			}
			str := string(id)
			p.id, p.uid = &str, &uid
		}
		patterns = append(patterns, p)
	}
	s.endSessions(func(k sessionKey) bool {
		if len(patterns) == 0 {
			return true
		}
		for _, p := range patterns {
			if (p.uid == nil || *p.uid == k.uid) && (p.id == nil || *p.id == k.id) {
				return true
			}
		}
		return false
	})
	return bson.D{}, nil
}

// sessionUIDField reads a uid: a SHA-256 digest as generic binary data.
func sessionUIDField(item, field string, v bson.RawValue) ([sha256.Size]byte, error) {
	var uid [sha256.Size]byte
	_, data, ok := v.BinaryOK()
	if !ok {
		return uid, typeMismatch(item, field, v, "binData")
	}
	if len(data) != sha256.Size {
		return uid, mongoerr.New(mongoerr.BadValue, "BSON field '%s.%s' must be a SHA-256 digest of %d bytes, not %d", item, field, sha256.Size, len(data))
	}
	copy(uid[:], data)
	return uid, nil
}
