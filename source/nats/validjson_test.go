package nats

import (
	"encoding/json"
	"testing"
)

var validJSONSeeds = []string{
	``, ` `, `null`, `true`, `false`, `0`, `-0`, `01`, `1.`, `1e`, `1e+5`, `-1.5E-3`, `.5`, `+1`,
	`""`, `"a\"b"`, `"\u00e9"`, `"\ud800"`, `"\udc00\ud800"`, `"\x"`, `"` + "\x01" + `"`, "\"\xff\xfe\"", `"\u12"`,
	`{}`, `[]`, `[1,]`, `{"a":1,}`, `{"a":1,"a":2}`, `{"a"}`, `{1:2}`, `[1 2]`, ` {"a" : [1, {"b": null}] } `,
	`{"a":1}x`, `{"a":1} {"b":2}`, `[` + "\n" + `1` + "\r\n" + `]`, `nul`, `True`, `"abc`, `[[[[[[[[[[]]]]]]]]]]`,
	`{"n":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, "\ufeff{}", `[1e999]`, `"\/"`, `"\'"`,
}

// TestValidJSONMatchesEncodingJSON keeps the faster validator to the
// rules of the one it replaced: a payload accepted or refused before is
// accepted or refused now.
func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range validJSONSeeds {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid = %v", s, got, want)
		}
	}
	deep := make([]byte, 0, 20002)
	for range 10001 {
		deep = append(deep, '[')
	}
	for range 10001 {
		deep = append(deep, ']')
	}
	if got, want := validJSON(deep), json.Valid(deep); got != want {
		t.Errorf("10001 nested arrays: validJSON = %v, json.Valid = %v", got, want)
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	p := payload256(12345)
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for range b.N {
			if !json.Valid(p) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for range b.N {
			if !validJSON(p) {
				b.Fatal("invalid")
			}
		}
	})
}
