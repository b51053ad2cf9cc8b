package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	stamped := func(mainVersion string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/tide-cdc/tide", Version: mainVersion}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const rev = "12c3cca1fcbfe090341e003a9234833af50674dc"
	const when = "2026-12-04T14:21:21Z"
	tests := map[string]struct {
		version, commit, date string
		info                  *debug.BuildInfo
		want                  buildVersion
	}{
		"release: link-time values win over the VCS stamp": {
			version: "v1.2.0", commit: "abc", date: "2026-12-01T00:00:00Z",
			info: stamped("(devel)", "vcs.revision", rev, "vcs.time", when),
			want: buildVersion{Version: "v1.2.0", Commit: "abc", Date: "2026-12-01T00:00:00Z", Go: "go1.26.8"},
		},
		"checkout with VCS stamp": {
			version: "dev",
			info:    stamped("v0.0.0-20261204142121-12c3cca1fcbf", "vcs.revision", rev, "vcs.time", when, "vcs.modified", "false"),
			want:    buildVersion{Version: "dev", Commit: rev, Date: when, Go: "go1.26.8"},
		},
		"modified checkout": {
			version: "dev",
			info:    stamped("v0.0.0-20261204142121-12c3cca1fcbf+dirty", "vcs.revision", rev, "vcs.time", when, "vcs.modified", "true"),
			want:    buildVersion{Version: "dev", Commit: rev + "-dirty", Date: when, Go: "go1.26.8"},
		},
		"pseudo-version after a tag": {
			version: "dev",
			info:    stamped("v1.2.1-0.20261204142121-12c3cca1fcbf", "vcs.revision", rev, "vcs.time", when),
			want:    buildVersion{Version: "dev", Commit: rev, Date: when, Go: "go1.26.8"},
		},
		"go install of a tag": {
			version: "dev",
			info:    stamped("v1.2.3"),
			want:    buildVersion{Version: "v1.2.3", Commit: unknown, Date: unknown, Go: "go1.26.8"},
		},
		"no VCS information": {
			version: "dev",
			info:    stamped("(devel)"),
			want:    buildVersion{Version: "dev", Commit: unknown, Date: unknown, Go: "go1.26.8"},
		},
		"no build information at all": {
			want: buildVersion{Version: "dev", Commit: unknown, Date: unknown, Go: runtime.Version()},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := versionOf(tt.version, tt.commit, tt.date, tt.info)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWriteVersion(t *testing.T) {
	t.Parallel()
	v := buildVersion{Version: "v1.2.0", Commit: "12c3cca", Date: "2026-12-04T14:21:21Z", Go: "go1.26.8"}

	var text bytes.Buffer
	if err := writeVersion(&text, v, false); err != nil {
		t.Fatal(err)
	}
	want := "tide v1.2.0\ncommit: 12c3cca\ndate:   2026-12-04T14:21:21Z\ngo:     go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if text.String() != want {
		t.Errorf("text: got %q, want %q", text.String(), want)
	}

	var js bytes.Buffer
	if err := writeVersion(&js, v, true); err != nil {
		t.Fatal(err)
	}
	want = `{"version":"v1.2.0","commit":"12c3cca","date":"2026-12-04T14:21:21Z","go":"go1.26.8"}` + "\n"
	if js.String() != want {
		t.Errorf("json: got %q, want %q", js.String(), want)
	}
}

// TestVersionCommand runs `tide version` and `tide version --json` of the
// real binary. It is built by go build without -ldflags, so what it knows
// depends on the checkout: a commit and date when go build stamped VCS
// information, "unknown" when it did not (-buildvcs=false).
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	out, err := tideCmd(t, dir, "version", "--json").Output()
	if err != nil {
		t.Fatalf("tide version --json: %v", err)
	}
	var fields map[string]string
	if err := json.Unmarshal(out, &fields); err != nil {
		t.Fatalf("tide version --json: %v\n%s", err, out)
	}
	if len(fields) != 4 {
		t.Errorf("tide version --json: got keys %v, want version, commit, date, go", fields)
	}
	if fields["version"] == "" {
		t.Errorf("version empty: %s", out)
	}
	if c := fields["commit"]; c != unknown && !regexp.MustCompile(`^[0-9a-f]{40}(-dirty)?$`).MatchString(c) {
		t.Errorf("commit %q: want a full revision or %q", c, unknown)
	}
	if d := fields["date"]; d != unknown {
		if _, err := time.Parse(time.RFC3339, d); err != nil {
			t.Errorf("date %q: want RFC 3339 or %q", d, unknown)
		}
	}
	if g := fields["go"]; g != runtime.Version() {
		t.Errorf("go: got %q, want %q (the toolchain that built the test)", g, runtime.Version())
	}

	text, err := tideCmd(t, dir, "version").Output()
	if err != nil {
		t.Fatalf("tide version: %v", err)
	}
	want := "tide " + fields["version"] + "\ncommit: " + fields["commit"] + "\ndate:   " + fields["date"] +
		"\ngo:     " + fields["go"] + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if string(text) != want {
		t.Errorf("tide version: got %q, want %q", text, want)
	}

	if out, err := runTide(t, dir, "version", "extra"); err == nil || !strings.Contains(out, `unknown command "extra"`) {
		t.Errorf("tide version extra: got %v, %q; want a refusal", err, out)
	}
}
