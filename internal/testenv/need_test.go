package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recordingTB records what Need asks of a test, without stopping it.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
}

func TestNeed(t *testing.T) {
	missing := errors.New("mongosh is not on PATH (npm install -g mongosh)")
	tests := map[string]struct {
		what      string
		err       error
		env       map[string]string
		wantFatal string // a substring; "" for no failure
		wantSkip  string // a substring; "" for no skip
	}{
		"found":                  {what: "mongosh", err: nil, env: map[string]string{"CI": "true"}},
		"missing locally":        {what: "mongosh", err: missing, wantSkip: "needs mongosh: mongosh is not on PATH (npm install -g mongosh); TIDE_REQUIRE_MONGOSH=1 or CI=true makes this a failure"},
		"missing in CI":          {what: "mongosh", err: missing, env: map[string]string{"CI": "true"}, wantFatal: "needs mongosh, and CI=true requires it: mongosh is not on PATH"},
		"missing, required":      {what: "postgres", err: missing, env: map[string]string{"TIDE_REQUIRE_POSTGRES": "1"}, wantFatal: "TIDE_REQUIRE_POSTGRES=1 requires it"},
		"required by another":    {what: "pymongo", err: missing, env: map[string]string{"TIDE_REQUIRE_MONGOSH": "1"}, wantSkip: "TIDE_REQUIRE_PYMONGO=1 or CI=true makes this a failure"},
		"CI=false is not CI":     {what: "chromium", err: missing, env: map[string]string{"CI": "false"}, wantSkip: "needs chromium"},
		"not installed by CI":    {what: "tools", err: missing, env: map[string]string{"CI": "true"}, wantSkip: "; TIDE_REQUIRE_TOOLS=1 makes this a failure"},
		"not installed, but req": {what: "tools", err: missing, env: map[string]string{"CI": "true", "TIDE_REQUIRE_TOOLS": "1"}, wantFatal: "TIDE_REQUIRE_TOOLS=1 requires it"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"CI", "TIDE_REQUIRE_MONGOSH", "TIDE_REQUIRE_POSTGRES", "TIDE_REQUIRE_PYMONGO", "TIDE_REQUIRE_CHROMIUM", "TIDE_REQUIRE_TOOLS"} {
				t.Setenv(k, tc.env[k])
			}
			r := &recordingTB{TB: t}
			Need(r, tc.what, tc.err)
			if tc.wantFatal == "" && r.fatal != "" || !strings.Contains(r.fatal, tc.wantFatal) {
				t.Errorf("failure %q, want one containing %q", r.fatal, tc.wantFatal)
			}
			if tc.wantSkip == "" && r.skip != "" || !strings.Contains(r.skip, tc.wantSkip) {
				t.Errorf("skip %q, want one containing %q", r.skip, tc.wantSkip)
			}
			if r.fatal != "" && r.skip != "" {
				t.Errorf("both failed (%q) and skipped (%q)", r.fatal, r.skip)
			}
		})
	}
}

// TestNeedSkips checks the skip on a real test.
func TestNeedSkips(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("TIDE_REQUIRE_TOOLS", "")
	ran := false
	t.Run("sub", func(t *testing.T) {
		Need(t, "tools", errors.New("mongodump is not on PATH"))
		ran = true
	})
	if ran {
		t.Error("Need returned after a skip")
	}
}

func TestNeedRefusesAnUnclearName(t *testing.T) {
	for _, what := range []string{"", "PostgreSQL", "mongo sh", "TIDE_REQUIRE_X"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Need(%q) did not panic", what)
				}
			}()
			Need(&recordingTB{TB: t}, what, nil)
		}()
	}
}
