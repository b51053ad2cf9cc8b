package encode

import (
	"encoding/json"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// The benchmarks of issue #5: change events of about 0.5 KiB and 4 KiB of
// BSON to envelope JSON lines, one event per op on one core. Compare
// BenchmarkEnvelope with BenchmarkNaive (bson.Unmarshal into bson.M, then
// encoding/json) and BenchmarkDriverExtJSON (bson.MarshalExtJSON) from the
// same run.

var benchSizes = []struct {
	name string
	size int
}{{"0.5KiB", 512}, {"4KiB", 4096}}

func BenchmarkEnvelope(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			ev := changeEvent(b, s.size)
			b.SetBytes(int64(eventSize(&ev)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = Envelope(dst[:0], &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEnvelopeFresh appends each event to a new buffer, as a caller
// that keeps every record would.
func BenchmarkEnvelopeFresh(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			ev := changeEvent(b, s.size)
			b.SetBytes(int64(eventSize(&ev)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Envelope(nil, &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNaive(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			ev := changeEvent(b, s.size)
			b.SetBytes(int64(eventSize(&ev)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := naiveEnvelope(&ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDriverExtJSON(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			ev := changeEvent(b, s.size)
			b.SetBytes(int64(eventSize(&ev)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = driverEnvelope(dst[:0], &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// naiveEnvelope is the baseline: every document decoded into a bson.M, the
// envelope marshalled by encoding/json.
func naiveEnvelope(ev *cdc.Event) ([]byte, error) {
	m := map[string]any{
		"_namespace":      ev.Namespace,
		"_op":             ev.Op,
		"_cluster_time_s": ev.ClusterTime.T,
		"_cluster_time_i": ev.ClusterTime.I,
		"_wall_time_ms":   ev.WallTimeMS,
	}
	for key, raw := range map[string][]byte{
		"_document_key":  ev.DocumentKey,
		"_full_document": ev.FullDocument,
		"_update_desc":   ev.UpdateDesc,
		"_resume_token":  ev.ResumeToken,
	} {
		if raw == nil {
			m[key] = nil
			continue
		}
		var doc bson.M
		if err := bson.Unmarshal(raw, &doc); err != nil {
			return nil, err
		}
		m[key] = doc
	}
	return json.Marshal(m)
}

// BenchmarkDebezium is BenchmarkEnvelope for the Debezium value (with a
// fixed clock: the cost of time.Now is not the encoder's); the documents
// are written as JSON strings, so each is escaped once more.
func BenchmarkDebezium(b *testing.B) {
	enc := &Debezium{Name: "bench", Now: fixedNow}
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			ev := changeEvent(b, s.size)
			b.SetBytes(int64(eventSize(&ev)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = enc.Encode(dst[:0], &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
