package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tide-cdc/tide/cdc"
)

// FormatVersion is the record format this package writes and reads.
const FormatVersion = 1

const checksumPrefix = "crc32c:"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is a checkpoint as stored on disk.
type Record struct {
	Format   int    `json:"format"`
	Pipeline string `json:"pipeline"`
	// Generation counts the pipeline's saves; of the two pages of a
	// checkpoint file, the valid one with the higher generation is the
	// checkpoint. Records written before pages alternated have none (0).
	Generation uint64 `json:"generation,omitempty"`
	// Owner names who holds the pipeline, in stores shared by several
	// workers (NATS KV); empty in a data directory's records.
	Owner    string            `json:"owner,omitempty"`
	SavedAt  time.Time         `json:"saved_at"`
	Source   json.RawMessage   `json:"source"` // cdc.Position; null before the first commit
	Meta     map[string]string `json:"meta,omitempty"`
	Sink     json.RawMessage   `json:"sink"` // sink state; null if the sink has none
	Checksum string            `json:"checksum"`
}

// content is Record without its checksum: the canonical form the checksum
// covers. Field order and tags must match Record's.
type content struct {
	Format     int               `json:"format"`
	Pipeline   string            `json:"pipeline"`
	Generation uint64            `json:"generation,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	SavedAt    time.Time         `json:"saved_at"`
	Source     json.RawMessage   `json:"source"`
	Meta       map[string]string `json:"meta,omitempty"`
	Sink       json.RawMessage   `json:"sink"`
}

// Checkpoint returns the record as the runtime sees it.
func (r *Record) Checkpoint() cdc.Checkpoint {
	return cdc.Checkpoint{
		Source: cdc.Position(nullToNil(r.Source)),
		Meta:   cloneMeta(r.Meta),
		Sink:   nullToNil(r.Sink),
	}
}

// checksum computes the checksum of r's canonical content. json.Marshal
// compacts raw messages and sorts map keys, so the encoding depends only on
// the values, not on how the file was indented.
func (r *Record) checksum() (string, error) {
	b, err := marshal(content{r.Format, r.Pipeline, r.Generation, r.Owner, r.SavedAt, r.Source, r.Meta, r.Sink}, false)
	if err != nil {
		return "", err
	}
	return checksumPrefix + fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli)), nil
}

// marshal encodes v without HTML escaping, so that a position comes back
// byte for byte as the source gave it (compacted).
func marshal(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // ends in a newline
}

// encodeRecord returns the file content for cp, with no generation.
func encodeRecord(pipeline string, cp cdc.Checkpoint, now time.Time) ([]byte, error) {
	return encodeGeneration(pipeline, 0, cp, now)
}

// encodeGeneration returns the record of cp as the gen-th save.
func encodeGeneration(pipeline string, gen uint64, cp cdc.Checkpoint, now time.Time) ([]byte, error) {
	return Encode(pipeline, gen, "", cp, now)
}

// Encode returns the record of cp as the pipeline's gen-th save, held by
// owner (may be empty), with its checksum: the indented JSON that a data
// directory's page holds, unpadded. It is exported for the other stores
// of these records (package checkpoint/natskv), so that a record reads the
// same wherever it is kept.
func Encode(pipeline string, gen uint64, owner string, cp cdc.Checkpoint, now time.Time) ([]byte, error) {
	if len(cp.Source) > 0 && !json.Valid(cp.Source) {
		return nil, fmt.Errorf("source position is not JSON: %.64q", cp.Source)
	}
	if len(cp.Sink) > 0 && !json.Valid(cp.Sink) {
		return nil, fmt.Errorf("sink state is not JSON: %.64q", cp.Sink)
	}
	for k, v := range cp.Meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("meta %q: %q is not valid UTF-8", k, v)
		}
	}
	r := Record{
		Format:     FormatVersion,
		Pipeline:   pipeline,
		Generation: gen,
		Owner:      owner,
		SavedAt:    now.UTC(),
		Source:     json.RawMessage(cp.Source),
		Meta:       cp.Meta,
		Sink:       json.RawMessage(cp.Sink),
	}
	sum, err := r.checksum()
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	r.Checksum = sum
	b, err := marshal(&r, true)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

// Decode parses and verifies a record written by Encode; where names it
// in errors (a file, a bucket and key). Every problem, including a record
// of another pipeline, is a *CorruptError whose Path is where.
func Decode(where, pipeline string, b []byte) (*Record, error) {
	return decodeRecord(where, pipeline, b)
}

// decodeRecord parses and verifies the content of path. Every problem is a
// *CorruptError.
func decodeRecord(path, pipeline string, b []byte) (*Record, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, corrupt("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corrupt("truncated: %v", err)
		}
		return nil, corrupt("not a checkpoint record: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt("unexpected data after the record")
	}
	// A record padded for in-place rewrites fills exactly one page.
	if rest := len(b) - int(dec.InputOffset()); rest > 1 && (len(b) != pageSize || b[len(b)-1] != '\n') {
		return nil, corrupt("truncated: a padded record is %d bytes, want %d ending in a newline", len(b), pageSize)
	}
	if r.Format != FormatVersion {
		return nil, corrupt("unknown format version %d, this tide reads version %d", r.Format, FormatVersion)
	}
	if !strings.HasPrefix(r.Checksum, checksumPrefix) {
		return nil, corrupt("missing or unknown checksum %s", strconv.Quote(r.Checksum))
	}
	want, err := r.checksum()
	if err != nil {
		return nil, corrupt("re-encode for checksum: %v", err)
	}
	if r.Checksum != want {
		return nil, corrupt("checksum mismatch: recorded %s, content has %s", r.Checksum, want)
	}
	if r.Pipeline != pipeline {
		return nil, corrupt("record is for pipeline %q, not %q", r.Pipeline, pipeline)
	}
	return &r, nil
}

// nullToNil returns b compacted (the file is indented), or nil for null.
func nullToNil(b json.RawMessage) []byte {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return bytes.Clone(b) // not reached: the decoder validated b
	}
	return c.Bytes()
}

func cloneMeta(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
