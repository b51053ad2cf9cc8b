package mongowire_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/testenv"
)

// nodeDriver returns node and an environment in which require('mongodb')
// finds the Node.js driver: the one mongosh ships, or one on NODE_PATH.
// Without them the test skips, or fails in CI (testenv.Need).
func nodeDriver(t *testing.T) (node string, env []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Need(t, "mongosh", fmt.Errorf("%w (Node.js comes with mongosh: npm install -g mongosh)", err))
	}
	nodePath := os.Getenv("NODE_PATH")
	if root, err := exec.Command("npm", "root", "-g").Output(); err == nil {
		nodePath = strings.Join([]string{nodePath, filepath.Join(strings.TrimSpace(string(root)), "mongosh", "node_modules"), strings.TrimSpace(string(root))}, string(os.PathListSeparator))
	}
	env = append(os.Environ(), "NODE_PATH="+nodePath)
	probe := exec.Command(node, "-e", "require.resolve('mongodb')")
	probe.Env = env
	if err := probe.Run(); err != nil {
		testenv.Need(t, "mongosh", fmt.Errorf("the Node.js mongodb package is not on NODE_PATH nor inside a global mongosh (npm install -g mongosh): %w", err))
	}
	return node, env
}

// pymongoPython returns a python3 that imports pymongo (Debian's
// python3-pymongo). Without one the test skips, or fails in CI
// (testenv.Need).
func pymongoPython(t *testing.T) string {
	t.Helper()
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(cand); err == nil && exec.Command(p, "-c", "import pymongo").Run() == nil {
			return p
		}
	}
	testenv.Need(t, "pymongo", errors.New("no python3 with pymongo (Debian: python3-pymongo)"))
	return ""
}
