package mongo

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// filter decides which namespaces a multi-collection source captures:
// Collections (names or path.Match globs), then Exclude. With a database,
// the globs match collection names of that database; without one, they
// match "db.coll" and the stream is cluster-wide. System collections and
// the admin, local and config databases are never captured.
type filter struct {
	database string
	include  []nsGlob
	exclude  []nsGlob
}

// nsGlob is one glob split into its database and collection parts (db is
// the configured database for a database-level filter).
type nsGlob struct {
	text     string
	db, coll string
}

// newFilter validates the globs and splits the cluster-wide ones at their
// first '.', which a database name cannot contain.
func newFilter(database string, include, exclude []string) (*filter, error) {
	f := &filter{database: database}
	var errs []error
	parse := func(key string, list []string) []nsGlob {
		var out []nsGlob
		for i, g := range list {
			ng, err := parseGlob(database, g)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%d] %q: %v", key, i, g, err))
				continue
			}
			out = append(out, ng)
		}
		return out
	}
	f.include = parse("collections", include)
	f.exclude = parse("exclude", exclude)
	if len(include) == 0 {
		errs = append(errs, errors.New("collections is empty"))
	}
	return f, errors.Join(errs...)
}

func parseGlob(database, g string) (nsGlob, error) {
	if g == "" {
		return nsGlob{}, errors.New("is empty")
	}
	if _, err := path.Match(g, ""); err != nil {
		return nsGlob{}, fmt.Errorf("is not a valid glob (path.Match syntax: * ? [a-z] \\x): %v", err)
	}
	if database != "" {
		return nsGlob{text: g, db: database, coll: g}, nil
	}
	db, coll, ok := strings.Cut(g, ".")
	if !ok || db == "" || coll == "" {
		return nsGlob{}, errors.New(`without source.mongo.database an entry is a "db.coll" glob, such as "shop.*"`)
	}
	if _, err := path.Match(db, ""); err != nil {
		return nsGlob{}, fmt.Errorf("database part %q is not a valid glob: %v", db, err)
	}
	if _, err := path.Match(coll, ""); err != nil {
		return nsGlob{}, fmt.Errorf("collection part %q is not a valid glob: %v", coll, err)
	}
	return nsGlob{text: g, db: db, coll: coll}, nil
}

func (g nsGlob) match(db, coll string) bool {
	okDB, _ := path.Match(g.db, db)
	okColl, _ := path.Match(g.coll, coll)
	return okDB && okColl
}

// capturable reports whether a namespace may ever be captured.
func capturable(db, coll string) bool {
	switch db {
	case "", "admin", "local", "config":
		return false
	}
	return coll != "" && !strings.HasPrefix(coll, "system.")
}

// match reports whether the source captures db.coll.
func (f *filter) match(db, coll string) bool {
	if !capturable(db, coll) || (f.database != "" && db != f.database) {
		return false
	}
	in := false
	for _, g := range f.include {
		if g.match(db, coll) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, g := range f.exclude {
		if g.match(db, coll) {
			return false
		}
	}
	return true
}

// matchNS is match for "db.coll".
func (f *filter) matchNS(ns string) bool {
	db, coll, _ := strings.Cut(ns, ".")
	return f.match(db, coll)
}

// narrows reports whether f captures no namespace that old does not, by
// a rule that is simple to state and to check: each of f's collections
// entries is a plain name that old captures, or an entry of old's
// collections while f's exclude keeps every entry of old's. Dropping an
// entry from collections, adding one to exclude, or naming captured
// collections instead of a glob all narrow; anything else is taken to
// widen.
func (f *filter) narrows(old *filter) bool {
	if f.database != old.database {
		return false
	}
	keeps := true // f excludes all that old excludes
	for _, g := range old.exclude {
		keeps = keeps && slices.ContainsFunc(f.exclude, func(h nsGlob) bool { return h.text == g.text })
	}
	for _, g := range f.include {
		plain := !strings.ContainsAny(g.db+g.coll, `*?[\`)
		if plain && old.match(g.db, g.coll) {
			continue
		}
		if !keeps || !slices.ContainsFunc(old.include, func(h nsGlob) bool { return h.text == g.text }) {
			return false
		}
	}
	return true
}

// dbMayMatch reports whether some collection of db could be captured.
func (f *filter) dbMayMatch(db string) bool {
	if f.database != "" {
		return db == f.database
	}
	for _, g := range f.include {
		if ok, _ := path.Match(g.db, db); ok {
			return true
		}
	}
	return false
}

// stage is the $match that makes the server send only the events of
// captured namespaces: an event whose ns matches, a rename whose target
// matches (capture follows it), and dropDatabase and invalidate, which
// the reader checks itself. The source applies match to every event
// again, so the stage only saves bandwidth and work downstream: it must
// never drop an event match accepts, and it may let more through (system
// collections, names with '/'), which keeps it cheap for the server: a
// glob "*" is no condition, a plain name an equality, only the rest
// regular expressions.
func (f *filter) stage() bson.D {
	nsMatch := func(field string) bson.D {
		var and bson.A
		var or bson.A
		always := false
		for _, g := range f.include {
			c := g.cond(field, field == "ns" && f.database != "")
			if len(c) == 0 {
				always = true
				break
			}
			or = append(or, c)
		}
		if !always {
			and = append(and, bson.D{{Key: "$or", Value: or}})
		}
		if len(f.exclude) > 0 {
			var nor bson.A
			for _, g := range f.exclude {
				if c := g.cond(field, field == "ns" && f.database != ""); len(c) > 0 {
					nor = append(nor, c)
				}
			}
			if len(nor) > 0 {
				and = append(and, bson.D{{Key: "$nor", Value: nor}})
			}
		}
		if len(and) == 0 {
			return bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: true}}}}
		}
		return bson.D{{Key: "$and", Value: and}}
	}
	return bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		nsMatch("ns"),
		nsMatch("to"),
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"dropDatabase", "invalidate"}}}}},
	}}}}}
}

// cond is the condition that field (ns or to) names a namespace g
// matches, nil when every namespace does. sameDB leaves the database out
// (a database-level stream's ns is always its database).
func (g nsGlob) cond(field string, sameDB bool) bson.D {
	var d bson.D
	part := func(key, glob string) {
		switch {
		case glob == "*":
		case !strings.ContainsAny(glob, `*?[\`):
			d = append(d, bson.E{Key: key, Value: glob})
		default:
			d = append(d, bson.E{Key: key, Value: bson.Regex{Pattern: globRegexp(glob)}})
		}
	}
	if !sameDB {
		part(field+".db", g.db)
	}
	part(field+".coll", g.coll)
	return d
}

// globRegexp translates a valid path.Match pattern into an anchored
// regular expression that matches the same strings: * and ? do not match
// '/', classes keep their ranges and negation, everything else is literal.
func globRegexp(g string) string {
	var b strings.Builder
	b.WriteString(`^`)
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString(`[^/]*`)
		case '?':
			b.WriteString(`[^/]`)
		case '\\':
			i++
			if i < len(g) {
				b.WriteString(regexp.QuoteMeta(g[i : i+1]))
			}
		case '[':
			i++
			b.WriteString(`[`)
			if i < len(g) && g[i] == '^' {
				b.WriteString(`^/`) // a negated class does not match '/' either
				i++
			}
			for ; i < len(g) && g[i] != ']'; i++ {
				switch g[i] {
				case '\\':
					i++
					b.WriteString(classEscape(g[i]))
				case '-':
					b.WriteByte('-')
				default:
					b.WriteString(classEscape(g[i]))
				}
			}
			b.WriteString(`]`)
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString(`$`)
	return b.String()
}

func classEscape(c byte) string {
	switch c {
	case '\\', ']', '[', '^', '-':
		return `\` + string(c)
	}
	return string(c)
}
