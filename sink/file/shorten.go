package file

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// nameMax is the longest file name the sink writes, in bytes: Linux's
// NAME_MAX, and the most that common file systems allow. A file system
// with a lower limit lowers it (fsNameMax); a higher one does not raise
// it, so that a namespace gets the same file name on every machine.
const nameMax = 255

// hashDigits is how many hex digits of a SHA-256 a shortened name holds:
// 64 bits, so that two long names sharing their start stay apart.
const hashDigits = 16

// span is where a placeholder's value lies in a rendered path.
type span struct{ start, end int }

// shortenPath returns path with each element holding a placeholder's
// value cut to fit the file system: an element of more than nameMax
// bytes (less the fresh-file marker's suffix for the file's own name),
// and, while the whole path (with that suffix) is longer than
// PATH_MAX-1 bytes, the elements holding a placeholder, from the last.
// A cut element keeps its literal text before its first placeholder and
// after its last (such as ".jsonl"), and between them its start, cut
// where no UTF-8 sequence or %XX escape is split, then "~" and the first
// 16 hex digits of the SHA-256 of the whole element. Elements that fit
// are left as they are. vals are the placeholders' values in path, in
// order.
func (t *template) shortenPath(path string, vals []span) (string, error) {
	type element struct {
		start, end int // in path
		head, tail int // bytes of literal text before the first value and after the last
		short      string
	}
	var elems []element // those holding a value
	for i, start := 0, 0; i <= len(path); i++ {
		if i < len(path) && !os.IsPathSeparator(path[i]) {
			continue
		}
		e := element{start: start, end: i, head: -1}
		for _, v := range vals {
			if v.start >= start && v.end <= i {
				if e.head < 0 {
					e.head = v.start - start
				}
				e.tail = i - v.end
			}
		}
		if e.head >= 0 {
			e.short = path[start:i]
			elems = append(elems, e)
		}
		start = i + 1
	}
	if len(elems) == 0 {
		return path, nil
	}
	// The file's own name must leave room for its fresh-file marker.
	limits := make([]int, len(elems))
	for i, e := range elems {
		limits[i] = t.nameMax
		if e.end == len(path) {
			limits[i] -= len(freshSuffix)
		}
	}
	changed := false
	for i := range elems {
		e := &elems[i]
		if len(e.short) <= limits[i] {
			continue
		}
		s, err := shortenElement(path[e.start:e.end], e.head, e.tail, limits[i])
		if err != nil {
			return "", err
		}
		e.short, changed = s, true
	}
	over := len(path) + len(freshSuffix) - (t.pathMax - 1)
	for _, e := range elems {
		over -= e.end - e.start - len(e.short)
	}
	for i := len(elems) - 1; i >= 0 && over > 0; i-- {
		e := &elems[i]
		limit := max(e.head+1+hashDigits+e.tail, len(e.short)-over)
		if limit >= len(e.short) {
			continue
		}
		s, err := shortenElement(path[e.start:e.end], e.head, e.tail, limit)
		if err != nil {
			return "", err
		}
		over -= len(e.short) - len(s)
		e.short, changed = s, true
	}
	if over > 0 {
		return "", fmt.Errorf("its file %s is longer than the %d bytes a path may have, even with the names holding {db} or {coll} shortened", path, t.pathMax-1)
	}
	if !changed {
		return path, nil
	}
	var b strings.Builder
	last := 0
	for _, e := range elems {
		b.WriteString(path[last:e.start])
		b.WriteString(e.short)
		last = e.end
	}
	b.WriteString(path[last:])
	return b.String(), nil
}

// shortenElement returns elem, a path element longer than limit bytes,
// cut to at most limit: its first head and last tail bytes (literal text
// of the template), and between them the start of the rest and "~" with
// a hash of all of elem.
func shortenElement(elem string, head, tail, limit int) (string, error) {
	keep := limit - 1 - hashDigits - tail
	if keep < head {
		return "", fmt.Errorf("its file name %q is longer than the %d bytes the file system allows, "+
			"and the template's own text in it leaves no room for a shortened name", elem, limit)
	}
	keep = min(keep, len(elem)-tail)
	// Not in a UTF-8 sequence (at most 3 continuation bytes) ...
	for i := 0; i < utf8.UTFMax-1 && keep > head && !utf8.RuneStart(elem[keep]); i++ {
		keep--
	}
	// ... nor in a %XX escape.
	for _, back := range []int{1, 2} {
		if keep-back >= head && elem[keep-back] == '%' {
			keep -= back
			break
		}
	}
	sum := sha256.Sum256([]byte(elem))
	return elem[:keep] + "~" + hex.EncodeToString(sum[:])[:hashDigits] + elem[len(elem)-tail:], nil
}
