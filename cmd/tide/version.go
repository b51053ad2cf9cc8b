package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// unknown is what `tide version` says for what the build did not record.
const unknown = "unknown"

// buildVersion is what `tide version` prints. Its JSON names are a
// contract: scripts read `tide version --json`.
type buildVersion struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

// versionOf says what build this is. The values given at link time
// (-X main.Version, main.Commit, main.Date; `make release` sets them all)
// win; otherwise the module version and the VCS stamp that `go build`
// records (vcs.revision, vcs.time, vcs.modified) answer, and what neither
// knows is "unknown". A version that is neither set nor a release's module
// version (a build from a checkout, without `make release`) is "dev".
func versionOf(version, commit, date string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if info != nil {
		if info.GoVersion != "" {
			v.Go = info.GoVersion
		}
		if (v.Version == "" || v.Version == "dev") && isRelease(info.Main.Version) {
			v.Version = info.Main.Version
		}
		var revision, modified, vcsTime string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				vcsTime = s.Value
			}
		}
		if v.Commit == "" && revision != "" {
			v.Commit = revision
			if modified == "true" {
				v.Commit += "-dirty"
			}
		}
		if v.Date == "" {
			v.Date = vcsTime
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = unknown
	}
	if v.Date == "" {
		v.Date = unknown
	}
	return v
}

// pseudoVersion matches the end of a Go pseudo-version
// (v0.0.0-20261204142121-12c3cca1fcbf), which is what go build records for
// a commit without a tag, with +dirty for a modified tree.
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// isRelease reports whether a module version that go build recorded names
// a release: a tag, as `go install github.com/tide-cdc/tide/cmd/tide@v1.2.3`
// or a build of a clean tagged checkout records. A build of a checkout
// between tags or with changes (a pseudo-version, +dirty) or without VCS
// information ("(devel)") is not one.
func isRelease(mv string) bool {
	return mv != "" && mv != "(devel)" && !strings.HasSuffix(mv, "+dirty") && !pseudoVersion.MatchString(mv)
}

// currentVersion is versionOf this binary.
func currentVersion() buildVersion {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionOf(Version, Commit, Date, info)
}

// writeVersion prints v as `tide version` does: the version on the first
// line, then one line each for the commit, the date and the Go release
// with the platform; or, with asJSON, one JSON object.
func writeVersion(w io.Writer, v buildVersion, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(v)
	}
	_, err := fmt.Fprintf(w, "tide %s\ncommit: %s\ndate:   %s\ngo:     %s %s/%s\n",
		v.Version, v.Commit, v.Date, v.Go, runtime.GOOS, runtime.GOARCH)
	return err
}
