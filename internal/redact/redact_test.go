package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/redact"
)

const pw = "s3cr3t-P@ss/w0rd"

func TestString(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ in, want string }{
		"mongo uri":            {"mongodb://tide:hunter22@db1:27017,db2:27017/?replicaSet=rs0", "mongodb://tide:xxxxx@db1:27017,db2:27017/?replicaSet=rs0"},
		"mongo srv":            {"connect to mongodb+srv://u:p4ss@cluster.example.net/x: timeout", "connect to mongodb+srv://u:xxxxx@cluster.example.net/x: timeout"},
		"unescaped @ and /":    {"mongodb://u:" + pw + "@h/db", "mongodb://u:xxxxx@h/db"},
		"no password":          {"mongodb://127.0.0.1:27017/?replicaSet=rs0", "mongodb://127.0.0.1:27017/?replicaSet=rs0"},
		"user only":            {"mongodb://admin@h/", "mongodb://admin@h/"},
		"postgres url":         {"postgres://app:pa55word@pg:5432/app?sslmode=disable", "postgres://app:xxxxx@pg:5432/app?sslmode=disable"},
		"postgres url query":   {"postgres://pg/app?user=app&password=pa55word&sslmode=disable", "postgres://pg/app?user=app&password=xxxxx&sslmode=disable"},
		"postgres kv":          {"host=pg user=app password=pa55word dbname=app", "host=pg user=app password=xxxxx dbname=app"},
		"postgres kv quoted":   {`host=pg password='pa ss\'word' dbname=app`, "host=pg password=xxxxx dbname=app"},
		"postgres kv spaces":   {"host=pg password = pa55word", "host=pg password = xxxxx"},
		"sslpassword":          {"host=pg sslpassword=keypass", "host=pg sslpassword=xxxxx"},
		"nats user pass":       {"nats://bob:natspass@n1:4222,nats://n2:4222", "nats://bob:xxxxx@n1:4222,nats://n2:4222"},
		"nats token":           {"connect to nats tls://t0k3n@n1:4222", "connect to nats tls://xxxxx@n1:4222"},
		"json":                 {`{"password":"pa55word","user":"x"}`, `{"password":"xxxxx","user":"x"}`},
		"nkey seed":            {"seed SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU in creds", "seed xxxxx in creds"},
		"plain text untouched": {"resume_token=82abc user=app count: 3", "resume_token=82abc user=app count: 3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := redact.String(tc.in); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPasswords(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in   string
		want []string
	}{
		"url escaped": {"mongodb://u:p%40ss%2Fword@h/", []string{"p%40ss%2Fword", "p@ss/word"}},
		"kv quoted":   {`host=h password='it\'s secret'`, []string{`'it\'s secret'`, "it's secret"}},
		"nats token":  {"nats://tok3n@h:4222", []string{"tok3n"}},
		"none":        {"mongodb://h/?replicaSet=rs0", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := redact.Passwords(tc.in)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Passwords(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSetByValue(t *testing.T) {
	t.Parallel()
	var s redact.Set
	s.AddFrom("postgres://app:" + "p%40ss%2Fw0rd" + "@pg/app")
	s.Add("abc") // too short to hide by value
	// A library that prints the decoded password out of any URL shape.
	for _, in := range []string{
		`failed to connect to user=app database=app: auth failed for "p@ss/w0rd"`,
		`{"err":"bad p@ss/w0rd"}`,
		"escaped p%40ss%2Fw0rd and p%40ss%2Fw0rd",
	} {
		if got := s.String(in); strings.Contains(got, "p@ss/w0rd") || strings.Contains(got, "p%40ss%2Fw0rd") {
			t.Errorf("String(%q) = %q: the password is still there", in, got)
		}
	}
	if got := s.String("abc"); got != "abc" {
		t.Errorf("a 3-byte secret masked ordinary text: %q", got)
	}
	var nilSet *redact.Set
	if got := nilSet.String("mongodb://u:pw12@h"); got != "mongodb://u:xxxxx@h" {
		t.Errorf("nil set: %q", got)
	}
}

func TestSetError(t *testing.T) {
	t.Parallel()
	var s redact.Set
	s.Add(pw)
	base := errors.New("dial: password " + pw + " refused")
	err := s.Error(fmt.Errorf("connect: %w", base))
	if strings.Contains(err.Error(), pw) {
		t.Errorf("Error() = %q", err)
	}
	if !errors.Is(err, base) {
		t.Error("the redacted error lost its chain")
	}
	if s.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
	plain := errors.New("nothing secret")
	if s.Error(plain) != plain {
		t.Error("an error without a secret was wrapped")
	}
}

type stringer struct{}

func (stringer) String() string { return "dsn host=h password=" + pw }

func TestHandler(t *testing.T) {
	t.Parallel()
	var s redact.Set
	s.Add(pw)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			log := redact.Logger(slog.New(h), &s).With("uri", "mongodb://u:"+pw+"@h/")
			log = log.WithGroup("g").With(slog.Group("inner", "dsn", "password="+pw))
			log.Error("cannot use "+pw,
				"err", fmt.Errorf("wrapped: %w", errors.New(pw)),
				"stringer", stringer{},
				"list", []string{"nats://a:" + pw + "@h"},
				slog.Group("grp", "k", pw),
				"n", 3,
			)
			out := buf.String()
			if strings.Contains(out, pw) || strings.Contains(out, "s3cr3t") {
				t.Fatalf("the secret leaked:\n%s", out)
			}
			if !strings.Contains(out, "xxxxx") || !strings.Contains(out, "3") {
				t.Fatalf("unexpected output:\n%s", out)
			}
		})
	}
}
