package checkpoint

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The crash and lock tests re-execute the test binary; childEnv selects
// what the child does instead of running the tests.
const childEnv = "TIDE_CHECKPOINT_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "save-loop":
		saveLoop(os.Getenv("TIDE_CHECKPOINT_TEST_DIR"))
		return
	case "hold-lock":
		holdLock(os.Getenv("TIDE_CHECKPOINT_TEST_DIR"))
		return
	}
	goleak.VerifyTestMain(m)
}
