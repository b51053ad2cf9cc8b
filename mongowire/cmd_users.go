package mongowire

import (
	"context"
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// User management: createUser, updateUser, dropUser,
// dropAllUsersFromDatabase, grantRolesToUser, revokeRolesFromUser,
// usersInfo, connectionStatus. Users of $external (x.509, LDAP, Kerberos)
// and custom roles do not exist here, and are refused.

// userName reads the user named by the command's first field.
func userName(r *request) (string, error) {
	v := r.cmd.Index(0).Value()
	name, ok := v.StringValueOK()
	if !ok {
		return "", typeMismatch(r.name, r.name, v, "string")
	}
	if name == "" {
		return "", mongoerr.New(mongoerr.BadValue, "User name must not be empty")
	}
	if r.db == "$external" {
		return "", mongoerr.New(mongoerr.BadValue, "users in $external authenticate with x.509, LDAP or Kerberos, which this server does not support")
	}
	if err := validDB(r.db); err != nil {
		return "", err
	}
	return name, nil
}

// userOptions reads pwd, mechanisms, digestPassword and customData.
func userOptions(r *request) (pwd string, hasPwd bool, mechs []string, custom bson.Raw, err error) {
	a := newArgs(r)
	pwd, hasPwd = a.string("pwd")
	custom = a.doc("customData")
	if v, ok := a.lookup("digestPassword"); ok && !truthy(v) {
		return "", false, nil, nil, mongoerr.New(mongoerr.BadValue, "Use of SCRAM-SHA-256 requires undigested passwords; digestPassword: false is not supported")
	}
	if v, ok := a.lookup("mechanisms"); ok {
		arr, ok := v.ArrayOK()
		if !ok {
			return "", false, nil, nil, typeMismatch(r.name, "mechanisms", v, "array")
		}
		vals, _ := arr.Values()
		for _, m := range vals {
			name, ok := m.StringValueOK()
			if !ok || name != mechSHA1 && name != mechSHA256 {
				return "", false, nil, nil, mongoerr.New(mongoerr.BadValue, "Unknown auth mechanism '%s'", m)
			}
			mechs = append(mechs, name)
		}
		if len(mechs) == 0 {
			return "", false, nil, nil, mongoerr.New(mongoerr.BadValue, "mechanisms field must not be empty")
		}
	}
	return pwd, hasPwd, mechs, custom, a.err
}

func (s *Server) cmdCreateUser(_ context.Context, _ *conn, r *request) (bson.D, error) {
	name, err := userName(r)
	if err != nil {
		return nil, err
	}
	pwd, hasPwd, mechs, custom, err := userOptions(r)
	if err != nil {
		return nil, err
	}
	if !hasPwd {
		return nil, mongoerr.New(mongoerr.BadValue, "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	}
	rv, err := r.cmd.LookupErr("roles")
	if err != nil {
		return nil, missingField("createUser.roles")
	}
	roles, err := parseRoles(r.name, "roles", rv, r.db)
	if err != nil {
		return nil, err
	}
	if u := s.lookupUser(r.db, name); u != nil {
		return nil, errUserExists(u)
	}
	u, err := newUser(r.db, name, pwd, mechs, roles)
	if err != nil {
		return nil, err
	}
	u.CustomData = custom
	if err := s.putUser(u, true); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func (s *Server) cmdUpdateUser(_ context.Context, _ *conn, r *request) (bson.D, error) {
	name, err := userName(r)
	if err != nil {
		return nil, err
	}
	pwd, hasPwd, mechs, custom, err := userOptions(r)
	if err != nil {
		return nil, err
	}
	_, hasRoles := r.cmd.Lookup("roles").ArrayOK()
	if !hasPwd && !hasRoles && mechs == nil && custom == nil {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one field to update in updateUser")
	}
	old := s.lookupUser(r.db, name)
	if old == nil {
		return nil, errUserNotFound(name, r.db)
	}
	u := *old
	if rv, err := r.cmd.LookupErr("roles"); err == nil {
		if u.Roles, err = parseRoles(r.name, "roles", rv, r.db); err != nil {
			return nil, err
		}
	}
	if custom != nil {
		u.CustomData = custom
	}
	switch {
	case hasPwd:
		if mechs == nil {
			mechs = old.mechanisms()
		}
		nu, err := newUser(r.db, name, pwd, mechs, u.Roles)
		if err != nil {
			return nil, err
		}
		u.Creds = nu.Creds
	case mechs != nil: // mongod: mechanisms may only shrink without a new password
		creds := make(map[string]scramCreds, len(mechs))
		for _, m := range mechs {
			c, ok := old.Creds[m]
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "mechanisms field must be a subset of previously set mechanisms")
			}
			creds[m] = c
		}
		u.Creds = creds
	}
	if err := s.putUser(&u, false); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func (s *Server) cmdDropUser(_ context.Context, _ *conn, r *request) (bson.D, error) {
	name, err := userName(r)
	if err != nil {
		return nil, err
	}
	n, err := s.dropUsers(func(u *authUser) bool { return u.DB == r.db && u.User == name })
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errUserNotFound(name, r.db)
	}
	return bson.D{}, nil
}

func (s *Server) cmdDropAllUsersFromDatabase(_ context.Context, _ *conn, r *request) (bson.D, error) {
	n, err := s.dropUsers(func(u *authUser) bool { return u.DB == r.db })
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

func (s *Server) cmdGrantRolesToUser(_ context.Context, _ *conn, r *request) (bson.D, error) {
	return s.changeRoles(r, true)
}

func (s *Server) cmdRevokeRolesFromUser(_ context.Context, _ *conn, r *request) (bson.D, error) {
	return s.changeRoles(r, false)
}

func (s *Server) changeRoles(r *request, grant bool) (bson.D, error) {
	name, err := userName(r)
	if err != nil {
		return nil, err
	}
	rv, err := r.cmd.LookupErr("roles")
	if err != nil {
		return nil, missingField(r.name + ".roles")
	}
	roles, err := parseRoles(r.name, "roles", rv, r.db)
	if err != nil {
		return nil, err
	}
	old := s.lookupUser(r.db, name)
	if old == nil {
		return nil, errUserNotFound(name, r.db)
	}
	u := *old
	u.Roles = nil
	for _, role := range old.Roles {
		if grant || !containsRole(roles, role) {
			u.Roles = append(u.Roles, role)
		}
	}
	if grant {
		for _, role := range roles {
			if !containsRole(u.Roles, role) {
				u.Roles = append(u.Roles, role)
			}
		}
	}
	if err := s.putUser(&u, false); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// cmdUsersInfo: {usersInfo: 1 | "name" | {user, db} | [...] | {forAllDBs:
// true}, showCredentials, showPrivileges, showCustomData} -> {users}.
// Without viewUser on a database, a user sees only itself.
func (s *Server) cmdUsersInfo(_ context.Context, c *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	showCreds := a.bool("showCredentials")
	showPrivs := a.bool("showPrivileges")
	showCustom := true
	if v, ok := a.lookup("showCustomData"); ok {
		showCustom = truthy(v)
	}
	if v, ok := a.lookup("showAuthenticationRestrictions"); ok && truthy(v) {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "authentication restrictions are not supported by this server")
	}
	if _, ok := a.lookup("filter"); ok {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "usersInfo filter is not supported by this server")
	}
	if a.err != nil {
		return nil, a.err
	}
	var users []*authUser
	names := func(v bson.RawValue) error {
		switch v.Type {
		case bson.TypeString:
			if u := s.lookupUser(r.db, v.StringValue()); u != nil {
				users = append(users, u)
			}
		case bson.TypeEmbeddedDocument:
			d := v.Document()
			user, ok1 := d.Lookup("user").StringValueOK()
			db, ok2 := d.Lookup("db").StringValueOK()
			if !ok1 || !ok2 {
				return mongoerr.New(mongoerr.BadValue, "User name must be either a string or an object with \"user\" and \"db\" string fields")
			}
			if u := s.lookupUser(db, user); u != nil {
				users = append(users, u)
			}
		default:
			return mongoerr.New(mongoerr.BadValue, "User name must be either a string or an object")
		}
		return nil
	}
	v := r.cmd.Index(0).Value()
	switch {
	case v.Type == bson.TypeEmbeddedDocument && truthy(v.Document().Lookup("forAllDBs")):
		if r.db != "admin" {
			return nil, mongoerr.New(mongoerr.BadValue, "forAllDBs requires the admin database")
		}
		users = s.usersOf("")
	case v.Type == bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, e := range vals {
			if err := names(e); err != nil {
				return nil, err
			}
		}
	case v.Type == bson.TypeString || v.Type == bson.TypeEmbeddedDocument:
		if err := names(v); err != nil {
			return nil, err
		}
	default:
		if !truthy(v) {
			return nil, mongoerr.New(mongoerr.BadValue, "usersInfo argument must be 1, a user name, a {user, db} document or an array of them")
		}
		users = s.usersOf(r.db)
	}
	var p *privileges
	self := ""
	if s.cfg.Auth {
		p = s.privilegesOf(c)
		if c.auth.user != nil {
			self = c.auth.user.ID
		}
	}
	out := bson.A{}
	for _, u := range users {
		if s.cfg.Auth && u.ID != self && !p.on(actViewUser, u.DB, "") {
			return nil, unauthorized(r)
		}
		d := u.document(showCreds)
		if !showCustom {
			d = withoutKey(d, "customData")
		}
		d = append(d, bson.E{Key: "mechanisms", Value: mechsDoc(u)})
		if showPrivs {
			d = append(d,
				bson.E{Key: "inheritedRoles", Value: rolesDoc(u.Roles)},
				bson.E{Key: "inheritedPrivileges", Value: compilePrivileges(u.Roles).document()})
		}
		out = append(out, d)
	}
	return bson.D{{Key: "users", Value: out}}, nil
}

func mechsDoc(u *authUser) bson.A {
	out := bson.A{}
	for _, m := range u.mechanisms() {
		out = append(out, m)
	}
	return out
}

func withoutKey(d bson.D, key string) bson.D {
	out := d[:0:0]
	for _, e := range d {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

// cmdConnectionStatus: {connectionStatus: 1, showPrivileges} ->
// {authInfo: {authenticatedUsers, authenticatedUserRoles,
// authenticatedUserPrivileges?}}.
func (s *Server) cmdConnectionStatus(_ context.Context, c *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	showPrivs := a.bool("showPrivileges")
	if a.err != nil {
		return nil, a.err
	}
	users, roles := bson.A{}, bson.A{}
	var u *authUser
	if c != nil {
		s.privilegesOf(c) // logs out a dropped user
		u = c.auth.user
	}
	if u != nil {
		users = append(users, bson.D{{Key: "user", Value: u.User}, {Key: "db", Value: u.DB}})
		roles = rolesDoc(u.Roles)
	}
	info := bson.D{{Key: "authenticatedUsers", Value: users}, {Key: "authenticatedUserRoles", Value: roles}}
	if showPrivs {
		privs := bson.A{}
		if u != nil {
			privs = c.auth.privs.document()
		}
		info = append(info, bson.E{Key: "authenticatedUserPrivileges", Value: privs})
	}
	return bson.D{{Key: "authInfo", Value: info}}, nil
}

// cmdRolesInfo: {rolesInfo: 1 | "role" | {role, db} | [...],
// showBuiltinRoles, showPrivileges} -> {roles}. Every role here is
// built in, so rolesInfo: 1 lists them only with showBuiltinRoles, as
// mongod lists only user-defined roles by default.
func (s *Server) cmdRolesInfo(_ context.Context, _ *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	showBuiltin := a.bool("showBuiltinRoles")
	showPrivs := a.bool("showPrivileges")
	if a.bool("showAuthenticationRestrictions") {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "authentication restrictions are not supported by this server")
	}
	if a.err != nil {
		return nil, a.err
	}
	var refs []roleRef
	add := func(v bson.RawValue) error {
		switch v.Type {
		case bson.TypeString:
			refs = append(refs, roleRef{Role: v.StringValue(), DB: r.db})
		case bson.TypeEmbeddedDocument:
			role, ok1 := v.Document().Lookup("role").StringValueOK()
			db, ok2 := v.Document().Lookup("db").StringValueOK()
			if !ok1 || !ok2 {
				return mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects with \"role\" and \"db\" string fields")
			}
			refs = append(refs, roleRef{Role: role, DB: db})
		default:
			return mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
		}
		return nil
	}
	switch v := r.cmd.Index(0).Value(); v.Type {
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, e := range vals {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	case bson.TypeString, bson.TypeEmbeddedDocument:
		if err := add(v); err != nil {
			return nil, err
		}
	default:
		if showBuiltin {
			for _, name := range slices.Sorted(maps.Keys(builtinRoles)) {
				if ref := (roleRef{Role: name, DB: r.db}); checkRole(ref) == nil {
					refs = append(refs, ref)
				}
			}
		}
	}
	out := bson.A{}
	for _, ref := range refs {
		if checkRole(ref) != nil {
			continue // mongod leaves unknown roles out
		}
		d := bson.D{
			{Key: "role", Value: ref.Role}, {Key: "db", Value: ref.DB}, {Key: "isBuiltin", Value: true},
			{Key: "roles", Value: bson.A{}}, {Key: "inheritedRoles", Value: bson.A{}},
		}
		if showPrivs {
			p := compilePrivileges([]roleRef{ref}).document()
			d = append(d, bson.E{Key: "privileges", Value: p}, bson.E{Key: "inheritedPrivileges", Value: p})
		}
		out = append(out, d)
	}
	return bson.D{{Key: "roles", Value: out}}, nil
}
