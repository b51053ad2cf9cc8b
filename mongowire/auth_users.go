package mongowire

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	netconn "github.com/tide-cdc/tide/mongowire/internal/conn"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Users live in admin.system.users, in mongod's document shape: salted,
// iterated SCRAM keys only, never the password. The store journals them
// like any collection, so they survive a restart; the server keeps a copy
// in memory (authState) and bumps a generation counter on every change,
// so that connections recompute their cached privileges only then.

// usersNS is where users are stored.
var usersNS = store.Namespace{DB: "admin", Coll: "system.users"}

// SCRAM mechanisms, as mongod names them, and its default iteration counts.
const (
	mechSHA1   = netconn.MechSHA1
	mechSHA256 = netconn.MechSHA256

	itersSHA1   = 10000
	itersSHA256 = 15000
)

var allMechanisms = []string{mechSHA1, mechSHA256}

func mechHash(mech string) func() hash.Hash {
	if mech == mechSHA1 {
		return sha1.New
	}
	return sha256.New
}

type scramCreds = scram.StoredCredentials

// roleRef names a role in a database, as {role, db}.
type roleRef struct {
	Role string `bson:"role"`
	DB   string `bson:"db"`
}

// authUser is one user, as stored and as authentication needs it.
type authUser struct {
	ID         string                             // "db.user"
	UserID     bson.Binary                        // a UUID, as mongod's userId
	User, DB   string                             //
	Creds      map[string]scram.StoredCredentials // by mechanism
	Roles      []roleRef
	CustomData bson.Raw // nil when none
}

// mechanisms lists the user's mechanisms, sorted.
func (u *authUser) mechanisms() []string {
	ms := make([]string, 0, len(u.Creds))
	for m := range u.Creds {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// authState is the server's view of users and authentication counters.
type authState struct {
	mu    sync.RWMutex // guards users and writes to admin.system.users
	users map[string]*authUser
	gen   atomic.Uint64 // bumped by every change to users

	stats authCounters
}

// digestSHA1 is the password input of SCRAM-SHA-1: MongoDB hashes
// "user:mongo:password" with MD5 first, as its drivers do.
func digestSHA1(user, pwd string) string {
	sum := md5.Sum([]byte(user + ":mongo:" + pwd))
	return hex.EncodeToString(sum[:])
}

// newCredentials derives the stored SCRAM keys of pwd for mech, with a
// fresh random salt.
func newCredentials(mech, user, pwd string) (scram.StoredCredentials, error) {
	var (
		c     *scram.Client
		err   error
		iters int
	)
	switch mech {
	case mechSHA1:
		c, err = scram.SHA1.NewClientUnprepped(user, digestSHA1(user, pwd), "")
		iters = itersSHA1
	case mechSHA256:
		c, err = scram.SHA256.NewClient(user, pwd, "") // SASLprep'd, as mongod
		iters = itersSHA256
	default:
		return scram.StoredCredentials{}, mongoerr.New(mongoerr.BadValue, "Unknown auth mechanism '%s'", mech)
	}
	if err != nil {
		return scram.StoredCredentials{}, mongoerr.New(mongoerr.BadValue, "invalid password for %s: %v", mech, err)
	}
	salt := make([]byte, mechHash(mech)().Size()-4) // mongod's salt length
	rand.Read(salt)
	cred, err := c.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("derive %s keys: %w", mech, err)
	}
	return cred, nil
}

// document renders u as its admin.system.users document.
func (u *authUser) document(withCredentials bool) bson.D {
	d := bson.D{
		{Key: "_id", Value: u.ID},
		{Key: "userId", Value: u.UserID},
		{Key: "user", Value: u.User},
		{Key: "db", Value: u.DB},
	}
	if withCredentials {
		creds := bson.D{}
		for _, m := range u.mechanisms() {
			c := u.Creds[m]
			creds = append(creds, bson.E{Key: m, Value: bson.D{
				{Key: "iterationCount", Value: int32(c.Iters)},
				{Key: "salt", Value: base64.StdEncoding.EncodeToString([]byte(c.Salt))},
				{Key: "storedKey", Value: base64.StdEncoding.EncodeToString(c.StoredKey)},
				{Key: "serverKey", Value: base64.StdEncoding.EncodeToString(c.ServerKey)},
			}})
		}
		d = append(d, bson.E{Key: "credentials", Value: creds})
	}
	roles := bson.A{}
	for _, r := range u.Roles {
		roles = append(roles, bson.D{{Key: "role", Value: r.Role}, {Key: "db", Value: r.DB}})
	}
	d = append(d, bson.E{Key: "roles", Value: roles})
	if u.CustomData != nil {
		d = append(d, bson.E{Key: "customData", Value: u.CustomData})
	}
	return d
}

// parseUser reads a stored user document.
func parseUser(doc bson.Raw) (*authUser, error) {
	var raw struct {
		ID          string      `bson:"_id"`
		UserID      bson.Binary `bson:"userId"`
		User        string      `bson:"user"`
		DB          string      `bson:"db"`
		Credentials map[string]struct {
			IterationCount int32  `bson:"iterationCount"`
			Salt           string `bson:"salt"`
			StoredKey      string `bson:"storedKey"`
			ServerKey      string `bson:"serverKey"`
		} `bson:"credentials"`
		Roles      []roleRef `bson:"roles"`
		CustomData bson.Raw  `bson:"customData"`
	}
	if err := bson.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("decode user: %w", err)
	}
	u := &authUser{ID: raw.ID, UserID: raw.UserID, User: raw.User, DB: raw.DB, Roles: raw.Roles, CustomData: raw.CustomData, Creds: map[string]scram.StoredCredentials{}}
	for m, c := range raw.Credentials {
		salt, err1 := base64.StdEncoding.DecodeString(c.Salt)
		sk, err2 := base64.StdEncoding.DecodeString(c.StoredKey)
		vk, err3 := base64.StdEncoding.DecodeString(c.ServerKey)
		if err1 != nil || err2 != nil || err3 != nil || (m != mechSHA1 && m != mechSHA256) {
			return nil, fmt.Errorf("user %s: bad %s credentials", raw.ID, m)
		}
		u.Creds[m] = scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: int(c.IterationCount)}, StoredKey: sk, ServerKey: vk}
	}
	return u, nil
}

// loadUsers reads the users from the store, at Start.
func (s *Server) loadUsers() error {
	docs, err := s.rawStore.Find(usersNS, store.FindSpec{})
	if err != nil {
		return fmt.Errorf("read %s: %w", usersNS, err)
	}
	users := make(map[string]*authUser, len(docs))
	for _, d := range docs {
		u, err := parseUser(d)
		if err != nil {
			return err
		}
		users[u.ID] = u
	}
	s.auth.mu.Lock()
	s.auth.users = users
	s.auth.mu.Unlock()
	s.auth.gen.Add(1)
	return nil
}

// lookupUser returns the user named user in db, or nil.
func (s *Server) lookupUser(db, user string) *authUser {
	s.auth.mu.RLock()
	defer s.auth.mu.RUnlock()
	return s.auth.users[db+"."+user]
}

func (s *Server) hasUsers() bool {
	s.auth.mu.RLock()
	defer s.auth.mu.RUnlock()
	return len(s.auth.users) > 0
}

// usersOf returns the users of db ("" = all), sorted by id.
func (s *Server) usersOf(db string) []*authUser {
	s.auth.mu.RLock()
	defer s.auth.mu.RUnlock()
	var out []*authUser
	for _, u := range s.auth.users {
		if db == "" || u.DB == db {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// putUser writes u (insert or replace) to the store, waits until it is on
// disk, then publishes it.
func (s *Server) putUser(u *authUser, insert bool) error {
	doc, err := bson.Marshal(u.document(true))
	if err != nil {
		return fmt.Errorf("encode user %s: %w", u.ID, err)
	}
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	if insert {
		if _, ok := s.auth.users[u.ID]; ok {
			return errUserExists(u)
		}
		if _, errs := s.rawStore.Insert(usersNS, []bson.Raw{doc}, true); len(errs) > 0 {
			return errs[0].Err
		}
	} else {
		filter, _ := bson.Marshal(bson.D{{Key: "_id", Value: u.ID}})
		if _, err := s.rawStore.Update(usersNS, store.UpdateSpec{Filter: filter, Update: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}}); err != nil {
			return err
		}
	}
	if err := s.rawStore.WaitDurable(); err != nil {
		return err
	}
	s.auth.users[u.ID] = u
	s.auth.gen.Add(1)
	return nil
}

// dropUsers removes the users for which drop is true and returns how many.
func (s *Server) dropUsers(drop func(*authUser) bool) (int, error) {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	n := 0
	for id, u := range s.auth.users {
		if !drop(u) {
			continue
		}
		filter, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}})
		if _, err := s.rawStore.Delete(usersNS, filter, 1); err != nil {
			return n, err
		}
		delete(s.auth.users, id)
		n++
	}
	if n > 0 {
		if err := s.rawStore.WaitDurable(); err != nil {
			return n, err
		}
		s.auth.gen.Add(1)
	}
	return n, nil
}

func errUserExists(u *authUser) error {
	return mongoerr.New(mongoerr.UserAlreadyExists, "User \"%s@%s\" already exists", u.User, u.DB)
}

func errUserNotFound(user, db string) error {
	return mongoerr.New(mongoerr.UserNotFound, "Could not find user \"%s\" for db \"%s\"", user, db)
}

// newUser builds a user with credentials for mechs (default: both).
func newUser(db, user, pwd string, mechs []string, roles []roleRef) (*authUser, error) {
	if pwd == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "Password cannot be empty")
	}
	if len(mechs) == 0 {
		mechs = allMechanisms
	}
	u := &authUser{ID: db + "." + user, User: user, DB: db, Roles: roles, Creds: map[string]scram.StoredCredentials{}}
	uuid := make([]byte, 16) // a random (version 4) UUID
	rand.Read(uuid)
	uuid[6] = uuid[6]&0x0f | 0x40
	uuid[8] = uuid[8]&0x3f | 0x80
	u.UserID = bson.Binary{Subtype: bson.TypeBinaryUUID, Data: uuid}
	for _, m := range mechs {
		c, err := newCredentials(m, user, pwd)
		if err != nil {
			return nil, err
		}
		u.Creds[m] = c
	}
	return u, nil
}

// createAdminUser creates Config.AdminUser with the root role at Start,
// if no user exists yet, and forgets the password.
func (s *Server) createAdminUser() error {
	name, pwd := s.cfg.AdminUser, s.cfg.AdminPassword
	s.cfg.AdminPassword = ""
	if name == "" || s.hasUsers() {
		return nil
	}
	if strings.TrimSpace(pwd) == "" {
		return fmt.Errorf("admin user %q: no password given", name)
	}
	u, err := newUser("admin", name, pwd, nil, []roleRef{{Role: "root", DB: "admin"}})
	if err != nil {
		return fmt.Errorf("create admin user %q: %w", name, err)
	}
	if err := s.putUser(u, true); err != nil {
		return fmt.Errorf("create admin user %q: %w", name, err)
	}
	s.log.Info("created the first user", "user", name, "db", "admin", "role", "root")
	return nil
}
