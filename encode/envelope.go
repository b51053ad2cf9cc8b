package encode

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/tide-cdc/tide/cdc"
)

// Envelope appends the CDC envelope of ev (one JSON object, no newline) with
// its documents in relaxed Extended JSON; see the package documentation for
// the fields. A marker event (cdc.OpMarker) appends nothing. On error, dst is
// returned unchanged. Envelope is safe for concurrent use; it matches
// pipeline.EncodeFunc.
func Envelope(dst []byte, ev *cdc.Event) ([]byte, error) {
	return appendEnvelope(dst, ev, false)
}

// CanonicalEnvelope is Envelope with the documents in canonical Extended
// JSON, which keeps every BSON type (int32 and int64 and double apart, dates
// as integers).
func CanonicalEnvelope(dst []byte, ev *cdc.Event) ([]byte, error) {
	return appendEnvelope(dst, ev, true)
}

var errNilEvent = errors.New("encode: nil event")

func appendEnvelope(dst []byte, ev *cdc.Event, canonical bool) ([]byte, error) {
	if ev == nil {
		return dst, errNilEvent
	}
	if ev.Op == cdc.OpMarker {
		return dst, nil
	}
	start := len(dst)
	// One allocation at most for a fresh dst: the JSON of a document is
	// rarely more than twice its BSON.
	dst = slices.Grow(dst, 256+len(ev.Namespace)+len(ev.Payload)*4/3+
		2*(len(ev.DocumentKey)+len(ev.FullDocument)+len(ev.PreImage)+len(ev.UpdateDesc)+len(ev.ResumeToken)+len(ev.Extra)))
	var err error
	dst = append(dst, `{"_namespace":`...)
	dst = AppendString(dst, ev.Namespace)
	dst = append(dst, `,"_op":`...)
	dst = AppendString(dst, string(ev.Op))
	dst = append(dst, `,"_document_key":`...)
	if dst, err = appendDocOrNull(dst, ev.DocumentKey, canonical); err != nil {
		return dst[:start], fieldError("_document_key", ev, err)
	}
	dst = append(dst, `,"_cluster_time_s":`...)
	dst = strconv.AppendUint(dst, uint64(ev.ClusterTime.T), 10)
	dst = append(dst, `,"_cluster_time_i":`...)
	dst = strconv.AppendUint(dst, uint64(ev.ClusterTime.I), 10)
	dst = append(dst, `,"_wall_time_ms":`...)
	dst = strconv.AppendInt(dst, ev.WallTimeMS, 10)
	dst = append(dst, `,"_full_document":`...)
	switch ev.PayloadFormat {
	case cdc.PayloadNone:
		if dst, err = appendDocOrNull(dst, ev.FullDocument, canonical); err != nil {
			return dst[:start], fieldError("_full_document", ev, err)
		}
	case cdc.PayloadJSON:
		dst = appendJSONPayload(dst, ev.Payload)
	case cdc.PayloadString:
		dst = appendEscaped(dst, ev.Payload)
	case cdc.PayloadBase64:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, ev.Payload)
		dst = append(dst, '"')
	default:
		return dst[:start], fmt.Errorf("encode %s event on %s: unknown payload format %d", ev.Op, ev.Namespace, ev.PayloadFormat)
	}
	if ev.PreImage != nil {
		dst = append(dst, `,"_before":`...)
		if dst, err = appendDocOrNull(dst, ev.PreImage, canonical); err != nil {
			return dst[:start], fieldError("_before", ev, err)
		}
	}
	dst = append(dst, `,"_update_desc":`...)
	if dst, err = appendDocOrNull(dst, ev.UpdateDesc, canonical); err != nil {
		return dst[:start], fieldError("_update_desc", ev, err)
	}
	if ev.Extra != nil {
		dst = append(dst, `,"_extra":`...)
		if dst, err = appendDocOrNull(dst, ev.Extra, canonical); err != nil {
			return dst[:start], fieldError("_extra", ev, err)
		}
	}
	if len(ev.Headers) > 0 {
		dst = append(dst, `,"_headers":`...)
		dst = appendHeaders(dst, ev.Headers)
	}
	dst = append(dst, `,"_resume_token":`...)
	if dst, err = appendDocOrNull(dst, ev.ResumeToken, canonical); err != nil {
		return dst[:start], fieldError("_resume_token", ev, err)
	}
	return append(dst, '}'), nil
}

func fieldError(field string, ev *cdc.Event, err error) error {
	return fmt.Errorf("encode %s of %s event on %s: %w", field, ev.Op, ev.Namespace, err)
}

// appendDocOrNull writes null for an absent (nil or empty) document.
func appendDocOrNull(dst []byte, doc []byte, canonical bool) ([]byte, error) {
	if len(doc) == 0 {
		return append(dst, "null"...), nil
	}
	return appendTop(dst, doc, canonical)
}

// appendJSONPayload embeds a JSON payload as it is: the source validated it.
// An empty payload becomes null, and the line breaks of a pretty-printed
// payload become spaces, so that the record stays one line; outside strings
// they are only white space, and valid JSON has none inside strings.
func appendJSONPayload(dst []byte, payload []byte) []byte {
	if len(payload) == 0 {
		return append(dst, "null"...)
	}
	start := len(dst)
	dst = append(dst, payload...)
	// Two IndexByte scans, vectorised, cost a fraction of one ContainsAny,
	// which tests byte by byte; this runs on every message.
	if bytes.IndexByte(payload, '\n') >= 0 || bytes.IndexByte(payload, '\r') >= 0 {
		for i, c := range dst[start:] {
			if c == '\n' || c == '\r' {
				dst[start+i] = ' '
			}
		}
	}
	return dst
}

// appendHeaders writes headers as an object of string arrays, keys sorted
// so that the same message always encodes the same way.
func appendHeaders(dst []byte, headers map[string][]string) []byte {
	var small [16]string
	keys := small[:0]
	for k := range headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':', '[')
		for j, v := range headers[k] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}
