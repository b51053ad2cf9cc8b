package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// logField returns the value of key=... in the first log line holding msg.
func logField(t *testing.T, logs, msg, key string) string {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		if m := regexp.MustCompile(key + `=(\S+)`).FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no %s= in a %q line of:\n%s", key, msg, logs)
	return ""
}

// TestServeAuth: tide serve --auth with the first user from a password
// file; the Go driver authenticates with SCRAM-SHA-256, a wrong password
// is refused, and /metrics counts the failure.
func TestServeAuth(t *testing.T) {
	dir := t.TempDir()
	const pw = "serve-admin-pw-93ab"
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, logs := startTide(t, dir, "serving metrics", "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--auth", "--admin-user", "root", "--admin-password-file", pwFile, "--http-addr", "127.0.0.1:0")
	addr := logField(t, logs.String(), `msg=serving `, "addr")
	metricsAddr := logField(t, logs.String(), `msg="serving metrics"`, "addr")

	connect := func(pwd string) error {
		uri := "mongodb://" + url.UserPassword("root", pwd).String() + "@" + addr + "/?directConnection=true&authMechanism=SCRAM-SHA-256"
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return err
		}
		defer c.Disconnect(context.Background())
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = c.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		return err
	}
	if err := connect(pw); err != nil {
		t.Fatalf("root with the file's password: %v", err)
	}
	if err := connect("wrong"); err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`tide_mongowire_auth_failures_total{reason="wrong_password"} 1`,
		`tide_mongowire_auth_user_failures_total{user="admin.root"} 1`,
		`tide_mongowire_auth_connections_closed_total 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(logs.String(), pw) || strings.Contains(string(body), pw) {
		t.Fatalf("the password shows in the logs or metrics")
	}
}

func TestServeAuthFlagErrors(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("x"), 0o600)
	for name, tc := range map[string]struct {
		args []string
		env  string
		want string
	}{
		"user without password": {[]string{"--admin-user", "root"}, "", "--admin-user root needs a password"},
		"password without user": {[]string{"--admin-password-file", pwFile}, "", "without --admin-user"},
		"file and env":          {[]string{"--admin-user", "root", "--admin-password-file", pwFile}, "y", "not both"},
		"missing file":          {[]string{"--admin-user", "root", "--admin-password-file", filepath.Join(dir, "nope")}, "", "--admin-password-file"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := tideCmd(t, dir, append([]string{"serve", "--addr", "127.0.0.1:0", "--auth"}, tc.args...)...)
			if tc.env != "" {
				cmd.Env = append(cmd.Env, "TIDE_ADMIN_PASSWORD="+tc.env)
			}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("tide serve %v: %v\n%s\nwant an error mentioning %q", tc.args, err, out, tc.want)
			}
		})
	}
}

// TestServeAuthEnvPassword: the first user's password from TIDE_ADMIN_PASSWORD.
func TestServeAuthEnvPassword(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TIDE_ADMIN_PASSWORD", "env-pw-1f")
	_, logs := startTide(t, dir, "msg=serving", "serve", "--addr", "127.0.0.1:0", "--auth", "--admin-user", "boss")
	addr := logField(t, logs.String(), "msg=serving", "addr")
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://boss:env-pw-1f@" + addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	if _, err := c.ListDatabaseNames(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
}
