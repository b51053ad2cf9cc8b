package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCompletion keeps `tide completion SHELL` working: the README tells
// people to install its output.
func TestCompletion(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"bash":       "# bash completion V2 for tide",
		"zsh":        "#compdef tide",
		"fish":       "# fish completion for tide",
		"powershell": "Register-ArgumentCompleter",
	}
	for shell, want := range tests {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := Main([]string{"completion", shell}, &stdout, &stderr); code != 0 {
				t.Fatalf("tide completion %s: exit %d: %s", shell, code, stderr.String())
			}
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("tide completion %s: no %q in its output", shell, want)
			}
		})
	}

	// The scripts ask tide itself for candidates: subcommands and flags.
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"__complete", "ver"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tide __complete ver: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "version") {
		t.Errorf("tide __complete ver: got %q, want version among the candidates", stdout.String())
	}
	stdout.Reset()
	if code := Main([]string{"__complete", "version", "--j"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tide __complete version --j: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "--json") {
		t.Errorf("tide __complete version --j: got %q, want --json", stdout.String())
	}
}
