package mongowire_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMongosh runs tests/mongosh/crud.js and fidelity.js with mongosh against an
// in-process server. Without mongosh on PATH it skips, saying so, or
// fails in CI (testenv.Need).
func TestMongosh(t *testing.T) {
	bin, err := exec.LookPath("mongosh")
	if err != nil {
		testenv.Need(t, "mongosh", fmt.Errorf("%w (npm install -g mongosh)", err))
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
