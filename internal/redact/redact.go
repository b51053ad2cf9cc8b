// Package redact hides secrets in text meant for people: passwords in
// MongoDB, NATS and PostgreSQL connection strings, in both URL and
// keyword=value forms, and any secret value registered with a Set, so
// that even a library's error that echoes a DSN is caught.
//
// Two layers, because each misses what the other catches: String removes
// what looks like a credential wherever it appears (a URL's user
// password, a password= keyword), and a Set removes the exact values the
// configuration holds, however a library quotes them.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces every hidden secret.
const Mask = "xxxxx"

// MinSecretLen is the shortest value a Set redacts by value: a shorter
// one would mask ordinary words. Shorter passwords are still hidden
// where they appear as a password (String).
const MinSecretLen = 4

var (
	// scheme://user:password@ -- the password is what runs to the last
	// '@' before the host, so a password with an unescaped '@' or '/' is
	// hidden too.
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'"]*:)([^\s'"]*)@`)
	// nats://token@host: a NATS URL's lone user is a token.
	natsToken = regexp.MustCompile(`((?:nats|tls|ws|wss)://)([^\s:/@'"]+)@`)
	// password=... in a keyword/value DSN or a URL's query, quoted or
	// not; also sslpassword, passwd, pwd and token.
	keyword = regexp.MustCompile(`(?i)((?:^|[\s?&;,{(])(?:ssl)?(?:password|passwd|pwd|token)\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,})'"]+)`)
	// An nkey seed (a NATS private key): 'S', its type, base32, 58 in all.
	nkeySeed = regexp.MustCompile(`\bS[A-Z][A-Z2-7]{56}\b`)
	// "password": "..." in JSON.
	jsonKey = regexp.MustCompile(`(?i)("(?:ssl)?(?:password|passwd|pwd|token)"\s*:\s*)("(?:[^"\\]|\\.)*")`)
)

// String hides what looks like a credential in s: the password of every
// URL (scheme://user:password@host), the token of a NATS URL
// (nats://token@host), the value of password=, sslpassword=, token= and
// similar keywords, quoted or not, and NATS nkey seeds.
func String(s string) string {
	if strings.Contains(s, "S") {
		s = nkeySeed.ReplaceAllString(s, Mask)
	}
	if !strings.ContainsAny(s, "@=:") {
		return s
	}
	s = urlUserinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	s = natsToken.ReplaceAllString(s, "${1}"+Mask+"@")
	s = keyword.ReplaceAllString(s, "${1}"+Mask)
	return jsonKey.ReplaceAllString(s, "${1}\""+Mask+"\"")
}

// Passwords returns the secrets written in a connection string: a URL's
// password (decoded and as written), a NATS URL's token, and the values
// of password-like keywords. It is how a Set learns the secrets of a
// configuration's URIs and DSNs.
func Passwords(s string) []string {
	var out []string
	for _, m := range urlUserinfo.FindAllStringSubmatch(s, -1) {
		out = append(out, unescaped(m[2])...)
	}
	for _, m := range natsToken.FindAllStringSubmatch(s, -1) {
		out = append(out, unescaped(m[2])...)
	}
	for _, m := range keyword.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
			out = append(out, v)
			v = strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`).Replace(v[1 : len(v)-1])
		}
		out = append(out, unescaped(v)...)
	}
	return out
}

// unescaped returns v and, if it differs, its URL-decoded form.
func unescaped(v string) []string {
	if d, err := url.PathUnescape(v); err == nil && d != v {
		return []string{v, d}
	}
	return []string{v}
}

// A Set holds secret values and hides them, and what String hides, in
// text. The zero value is an empty set, ready to use; it is safe for
// concurrent use.
type Set struct {
	mu      sync.RWMutex // guards the fields below
	values  []string     // longest first, so that a secret containing another is hidden whole
	replace *strings.Replacer
}

// Add registers secret values. Empty values and values shorter than
// MinSecretLen are ignored. A value is also hidden in its URL-escaped
// and JSON-quoted spellings, which is how logs and libraries print it.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) < MinSecretLen {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v), jsonEscaped(v)} {
			if !slices.Contains(s.values, form) {
				s.values = append(s.values, form)
			}
		}
	}
	slices.SortFunc(s.values, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(s.values))
	for _, v := range s.values {
		pairs = append(pairs, v, Mask)
	}
	s.replace = strings.NewReplacer(pairs...)
}

// AddFrom registers the secrets written in connection strings (see
// Passwords).
func (s *Set) AddFrom(connStrings ...string) {
	for _, c := range connStrings {
		s.Add(Passwords(c)...)
	}
}

// Len returns the number of registered spellings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.values)
}

// String hides the registered values in text, then what String hides.
// A nil *Set hides only the latter.
func (s *Set) String(text string) string {
	if s != nil {
		s.mu.RLock()
		r := s.replace
		s.mu.RUnlock()
		if r != nil {
			text = r.Replace(text)
		}
	}
	return String(text)
}

// Error returns err with its message redacted, or nil. The result keeps
// err in its chain, so errors.Is and errors.As still see the original
// (whose own message is not redacted: print the result, not the cause).
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := s.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// jsonEscaped is v as it appears inside a JSON string.
func jsonEscaped(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '<':
			b.WriteString(`\u003c`)
		case '>':
			b.WriteString(`\u003e`)
		case '&':
			b.WriteString(`\u0026`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
