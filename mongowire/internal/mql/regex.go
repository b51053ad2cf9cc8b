package mql

import (
	"regexp"
	"strings"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// compileRegex compiles a MongoDB regular expression with its options
// (i, m, s, x, u) into Go's RE2 syntax. PCRE-only constructs (lookaround,
// backreferences) are refused with MongoDB's "invalid regex" code. An
// unknown option is refused (51108) as mongod's pcre_util::flagsToOptions
// words it: opName, then " invalid flag in regex options: <flag>" (so a
// query's message starts with a space, opName being empty there).
func compileRegex(pattern, options, opName string) (*regexp.Regexp, error) {
	var flags strings.Builder
	extended := false
	for _, c := range options {
		switch c {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags.String(), c) {
				flags.WriteRune(c)
			}
		case 'x':
			extended = true
		case 'u':
		default:
			return nil, mongoerr.New(51108, "%s invalid flag in regex options: %c", opName, c)
		}
	}
	if extended {
		pattern = stripExtended(pattern)
	}
	if flags.Len() > 0 {
		pattern = "(?" + flags.String() + ")" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, mongoerr.New(51091, "Regular expression is invalid: %v", err)
	}
	return re, nil
}

// stripExtended removes the whitespace and #-comments that the x option
// ignores, outside character classes and escapes.
func stripExtended(p string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(c)
			b.WriteByte(p[i+1])
			i++
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			continue
		case c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
