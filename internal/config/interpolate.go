package config

import (
	"fmt"
	"strings"
)

// interpolate expands ${VAR} and ${VAR:-default} in s and turns $$ into $.
// A $ followed by anything else is kept.
func interpolate(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
		case '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated variable reference %q: missing }", s[i:])
			}
			ref := s[i+2 : i+end]
			s = s[i+end+1:]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !isVarName(name) {
				return "", fmt.Errorf("bad variable reference ${%s}: use ${NAME} or ${NAME:-default}, NAME of letters, digits and _", ref)
			}
			v, ok := getenv(name)
			switch {
			case hasDef && v == "":
				v = def
			case !ok:
				return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
			}
			b.WriteString(v)
		default:
			b.WriteByte('$')
			s = s[i+1:]
		}
	}
}

func isVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
