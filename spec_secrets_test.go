package tide

import (
	"slices"
	"strings"
	"testing"
)

const specSecretsYAML = `name: s
source:
  mongo:
    uri: mongodb://app:inl1nePW@db:27017/?replicaSet=rs0
    database: d
    collection: c
    full_document: update_lookup
sink:
  postgres:
    dsn: host=pg user=app password=${PGPW} dbname=app
`

func TestSpecSecretsAndWarnings(t *testing.T) {
	t.Parallel()
	s, err := parseSpec(specSecretsYAML, map[string]string{"PGPW": "fr0mEnv!"})
	if err != nil {
		t.Fatal(err)
	}
	secrets := s.Secrets()
	for _, want := range []string{"inl1nePW", "fr0mEnv!"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("Secrets() = %q, missing %q", secrets, want)
		}
	}
	w := s.Warnings()
	if len(w) != 1 {
		t.Fatalf("Warnings() = %q, want one (the inline mongo password; the DSN's is ${PGPW})", w)
	}
	if !strings.HasPrefix(w[0], "line 4: source.mongo.uri: a password is written inline") || !strings.Contains(w[0], "${VAR}") {
		t.Errorf("warning = %q", w[0])
	}
	if strings.Contains(w[0], "inl1nePW") {
		t.Errorf("the warning prints the secret: %q", w[0])
	}
}

func TestSpecWarningsEveryKind(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		yaml string
		want []string // key paths warned about
	}{
		"nats source token and url": {`name: n
source:
  nats: {servers: ["nats://bob:natsPW1@h:4222"], stream: S, consumer: c, auth: {token: tok3nInline}}
sink: {stdout: {}}
`, []string{"source.nats.servers[0]", "source.nats.auth.token"}},
		"nats sink password": {`name: n
source: {generate: {count: 1}}
sink:
  nats: {stream: S, auth: {user: u, password: natsPW2}}
`, []string{"sink.nats.auth.password"}},
		"postgres url and kv": {`name: n
source: {generate: {count: 1}}
sink:
  postgres: {dsn: "postgres://u:pgPW3@h/db", table: t}
`, []string{"sink.postgres.dsn"}},
		"postgres query password": {`name: n
source: {generate: {count: 1}}
sink:
  postgres: {dsn: "postgres://u@h/db?password=pgPW4", table: t}
`, []string{"sink.postgres.dsn"}},
		"all from the environment": {`name: n
source:
  mongo: {uri: "mongodb://app:${MPW}@db/", database: d, collection: c}
sink:
  nats: {stream: S, servers: ["nats://${NU}:${NP}@h"], auth: {token: "${TOK}"}}
`, nil},
		"embedded password": {`name: n
source:
  mongo: {uri: embedded, database: d, collection: c, embedded: {auth: true, user: tide, password: embPW5}}
sink: {stdout: {}}
`, []string{"source.mongo.embedded.password"}},
		"no secrets": {`name: n
source:
  mongo: {uri: "mongodb://db1,db2/?replicaSet=rs0", database: d, collection: c}
sink: {stdout: {}}
`, nil},
	}
	vars := map[string]string{"MPW": "m", "NU": "u", "NP": "p", "TOK": "t"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, vars)
			if err != nil {
				t.Fatal(err)
			}
			w := s.Warnings()
			if len(w) != len(tc.want) {
				t.Fatalf("Warnings() = %q, want %d about %q", w, len(tc.want), tc.want)
			}
			for i, path := range tc.want {
				if !strings.Contains(w[i], " "+path+": ") {
					t.Errorf("warning %q does not name %s", w[i], path)
				}
				for _, secret := range []string{"natsPW1", "tok3nInline", "natsPW2", "pgPW3", "pgPW4", "embPW5"} {
					if strings.Contains(w[i], secret) {
						t.Errorf("warning %q prints the secret", w[i])
					}
				}
			}
		})
	}
}

func TestSpecBadURINotEchoed(t *testing.T) {
	t.Parallel()
	_, err := parseSpec("name: b\nsource:\n  mongo: {uri: 'mongo://u:hunter22@h/', database: d, collection: c}\nsink: {stdout: {}}\n", nil)
	if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "source.mongo.uri") {
		t.Errorf("got %v: want a source.mongo.uri error without the password", err)
	}
}
