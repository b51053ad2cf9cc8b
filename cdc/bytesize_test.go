package cdc

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	good := map[string]ByteSize{
		"0": 0, "4096": 4096, "4MiB": 4 << 20, "64MiB": 64 << 20, "512KiB": 512 << 10, "1GB": 1e9,
		"1gib": 1 << 30, "2 KB": 2000, "1.5MiB": 3 << 19, "10B": 10, "1TiB": 1 << 40,
	}
	for in, want := range good {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":           "is not a byte size",
		"MiB":        "is not a byte size",
		"4XB":        "is not a byte size",
		"-1":         "is not a byte size",
		"4 M":        "is not a byte size",
		"1.2.3KB":    "is not a byte size",
		"0.5":        "is not a whole number of bytes",
		"9999999TiB": "is too large",
	}
	for in, want := range bad {
		_, err := ParseByteSize(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseByteSize(%q) = %v; want an error naming it and containing %q", in, err, want)
		}
	}
	for in, want := range map[ByteSize]string{4 << 20: "4MiB", 1000: "1000B", 0: "0B", 3 << 30: "3GiB"} {
		if in.String() != want {
			t.Errorf("ByteSize(%d).String() = %s, want %s", in, in.String(), want)
		}
	}
}
