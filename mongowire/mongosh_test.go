package mongowire_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMongosh runs tests/mongosh/crud.js and fidelity.js with mongosh against an
// in-process server. Without mongosh on PATH it skips, saying so, unless
// TIDE_REQUIRE_MONGOSH=1 (CI), where a missing mongosh fails the test.
func TestMongosh(t *testing.T) {
	bin, err := exec.LookPath("mongosh")
	if err != nil {
		if os.Getenv("TIDE_REQUIRE_MONGOSH") == "1" {
			t.Fatal("mongosh is not on PATH, and TIDE_REQUIRE_MONGOSH=1 requires it (npm install -g mongosh)")
		}
		t.Skip("mongosh is not on PATH: install it with `npm install -g mongosh` to run the scripted session (CI sets TIDE_REQUIRE_MONGOSH=1)")
	}
	_, file, _, _ := runtime.Caller(0)
	for _, name := range []string{"crud.js", "fidelity.js", "collections.js", "replication.js"} {
		t.Run(name, func(t *testing.T) {
			script := filepath.Join(filepath.Dir(file), "..", "tests", "mongosh", name)
			s := testenv.MongoWire(t)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "mongodb://"+s.Addr()+"/?directConnection=true", "--quiet", "--norc", "--file", script)
			cmd.Env = append(os.Environ(), "MONGOSH_NO_TELEMETRY=1", "DO_NOT_TRACK=1")
			out, err := cmd.CombinedOutput()
			t.Logf("mongosh output:\n%s", out)
			if err != nil {
				t.Fatalf("mongosh %s: %v", name, err)
			}
		})
	}
}
