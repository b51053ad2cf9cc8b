package mongowire_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeDriver returns node and an environment in which require('mongodb')
// finds the Node.js driver: the one mongosh ships, or one on NODE_PATH.
// Without them the test skips, or fails under TIDE_REQUIRE_MONGOSH=1.
func nodeDriver(t *testing.T) (node string, env []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	nodePath := os.Getenv("NODE_PATH")
	if root, err := exec.Command("npm", "root", "-g").Output(); err == nil {
		nodePath = strings.Join([]string{nodePath, filepath.Join(strings.TrimSpace(string(root)), "mongosh", "node_modules"), strings.TrimSpace(string(root))}, string(os.PathListSeparator))
	}
	env = append(os.Environ(), "NODE_PATH="+nodePath)
	probe := exec.Command(node, "-e", "require.resolve('mongodb')")
	probe.Env = env
	if err := probe.Run(); err != nil {
		if os.Getenv("TIDE_REQUIRE_MONGOSH") == "1" {
			t.Fatal("the Node.js mongodb package is not found (it comes with mongosh), and TIDE_REQUIRE_MONGOSH=1 requires it")
		}
		t.Skip("the Node.js mongodb package is not on NODE_PATH nor inside a global mongosh")
	}
	return node, env
}

// pymongoPython returns a python3 that imports pymongo (Debian's
// python3-pymongo). Without one the test skips, or fails under
// TIDE_REQUIRE_PYMONGO=1.
func pymongoPython(t *testing.T) string {
	t.Helper()
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(cand); err == nil && exec.Command(p, "-c", "import pymongo").Run() == nil {
			return p
		}
	}
	if os.Getenv("TIDE_REQUIRE_PYMONGO") == "1" {
		t.Fatal("no python3 with pymongo, and TIDE_REQUIRE_PYMONGO=1 requires it (Debian: python3-pymongo)")
	}
	t.Skip("no python3 with pymongo")
	return ""
}
