package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// ciProvides names what .ci/run installs on the CI machine. In CI a test
// that needs one of them and does not find it fails: a skip there would
// be a green run that proves nothing.
var ciProvides = map[string]bool{"postgres": true, "mongosh": true, "pymongo": true, "chromium": true, "kcat": true, "pyavro": true}

// Need is how a test says that it needs something from outside Go: a
// PostgreSQL server, mongosh, pymongo, Chromium, the MongoDB database
// tools. what is a lower-case word naming it ("postgres", "mongosh",
// "pymongo", "chromium", "tools"); err is the result of looking for it,
// nil when it was found, and otherwise saying what is missing and how to
// install it.
//
// When err is not nil the test is skipped, with err as the reason,
// unless the run requires what, and then the test fails:
//   - TIDE_REQUIRE_<WHAT>=1, what in upper case (TIDE_REQUIRE_MONGOSH=1),
//     requires what;
//   - CI=true requires what .ci/run installs: postgres, mongosh, pymongo,
//     chromium, kcat and pyavro (Apache Avro's Python library).
func Need(t testing.TB, what string, err error) {
	t.Helper()
	env := requireEnv(what)
	if err == nil {
		return
	}
	if by := requiredBy(what, env, os.Getenv); by != "" {
		t.Fatalf("this test needs %s, and %s requires it: %v", what, by, err)
		return
	}
	how := env + "=1"
	if ciProvides[what] {
		how += " or CI=true"
	}
	t.Skipf("skipped: this test needs %s: %v; %s makes this a failure", what, err, how)
}

// requiredBy returns the setting that makes a missing what a failure,
// or "" if none does.
func requiredBy(what, env string, getenv func(string) string) string {
	if getenv(env) == "1" {
		return env + "=1"
	}
	if ciProvides[what] && getenv("CI") == "true" {
		return "CI=true"
	}
	return ""
}

// requireEnv returns the variable that requires what: TIDE_REQUIRE_ and
// what in upper case. It panics if what is not a lower-case word.
func requireEnv(what string) string {
	if what == "" || strings.Trim(what, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		panic(fmt.Sprintf("testenv: Need(%q): what must be a lower-case word", what))
	}
	return "TIDE_REQUIRE_" + strings.ToUpper(what)
}
