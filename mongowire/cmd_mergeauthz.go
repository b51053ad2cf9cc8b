package mongowire

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdMergeAuthzCollections: {_mergeAuthzCollections: 1, tempUsersCollection:
// "admin.x", tempRolesCollection, drop, db} -> {}. mongorestore restores
// users by loading the dumped admin.system.users into a temporary
// collection and merging it with this internal command: every user of the
// temporary collection (of db, when given) replaces the user of that name,
// and with drop the users of that scope missing from it are removed.
// Custom roles do not exist on this server: a non-empty
// tempRolesCollection is refused.
func (s *Server) cmdMergeAuthzCollections(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	users, _ := a.string("tempUsersCollection")
	roles, _ := a.string("tempRolesCollection")
	drop := a.bool("drop")
	db, _ := a.string("db")
	if a.err != nil {
		return nil, a.err
	}
	if users == "" && roles == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "Must provide at least one of \"tempUsersCollection\" and \"tempRolescollection\"")
	}
	if roles != "" {
		ns, err := adminTempNS(roles)
		if err != nil {
			return nil, err
		}
		if n, _ := s.data(ctx).Count(ns, nil, 0, 0); n > 0 {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "custom roles are not supported by this server: %s holds %d", roles, n)
		}
	}
	if users == "" {
		return bson.D{}, nil
	}
	ns, err := adminTempNS(users)
	if err != nil {
		return nil, err
	}
	docs, err := s.data(ctx).Find(ns, store.FindSpec{})
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, d := range docs {
		u, err := parseUser(d)
		if err != nil {
			return nil, mongoerr.New(mongoerr.BadValue, "%s: %v", users, err)
		}
		if u.ID != u.DB+"."+u.User || u.User == "" || u.DB == "" {
			return nil, mongoerr.New(mongoerr.BadValue, "%s: user document %s has an _id that is not db.user", users, d)
		}
		if db != "" && u.DB != db {
			continue
		}
		keep[u.ID] = true
		if err := s.putUser(u, s.lookupUser(u.DB, u.User) == nil); err != nil {
			return nil, err
		}
	}
	if drop {
		if _, err := s.dropUsers(func(u *authUser) bool { return (db == "" || u.DB == db) && !keep[u.ID] }); err != nil {
			return nil, err
		}
	}
	return bson.D{}, nil
}

// adminTempNS reads "admin.coll", the only place the temporary
// collections may be.
func adminTempNS(name string) (store.Namespace, error) {
	db, coll, ok := strings.Cut(name, ".")
	if !ok || db != "admin" || coll == "" {
		return store.Namespace{}, mongoerr.New(mongoerr.BadValue, "the temporary collection %q must be in the admin database", name)
	}
	return store.Namespace{DB: db, Coll: coll}, nil
}
