package config

import (
	"strings"
	"testing"
)

func TestInterpolate(t *testing.T) {
	vars := env(map[string]string{"A": "1", "EMPTY": "", "B_2": "two"})
	good := map[string]string{
		"plain":            "plain",
		"${A}":             "1",
		"x${A}y${B_2}z":    "x1ytwoz",
		"${MISSING:-def}":  "def",
		"${EMPTY:-def}":    "def",
		"${EMPTY}":         "",
		"${A:-def}":        "1",
		"$$":               "$",
		"$${A}":            "${A}",
		"cost $5":          "cost $5",
		"end$":             "end$",
		"${MISSING:-a:-b}": "a:-b",
	}
	for in, want := range good {
		got, err := interpolate(in, vars)
		if err != nil || got != want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"${MISSING}": "environment variable MISSING is not set",
		"${}":        "bad variable reference ${}",
		"${A B}":     "bad variable reference ${A B}",
		"${A":        "unterminated variable reference",
		"${:-x}":     "bad variable reference",
	}
	for in, want := range bad {
		_, err := interpolate(in, vars)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("interpolate(%q) = %v; want an error containing %q", in, err, want)
		}
	}
}
