package mongo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// checkpointAfter opens a source, waits for its first event or marker and
// returns the checkpoint the runtime would save for it.
func checkpointAfter(t *testing.T, cfg Config) cdc.Checkpoint {
	t.Helper()
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatalf("open: %v", err)
	}
	defer src.Close()
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	return cdc.Checkpoint{Source: got[len(got)-1].Pos, Meta: src.Identity()}
}

func TestIdentity(t *testing.T) {
	e := newEnv(t)
	cp := checkpointAfter(t, e.config(t))
	for _, k := range identityKeys {
		if cp.Meta[k] == "" {
			t.Errorf("identity has no %s: %v", k, cp.Meta)
		}
	}
	if !strings.HasPrefix(cp.Meta["deployment_id"], "replset:") {
		t.Errorf("deployment_id = %q, want replset:<id>", cp.Meta["deployment_id"])
	}
	// The same configuration resumes.
	src := openSource(t, e.config(t), &cp)
	_ = src
}

// A checkpoint that does not match is refused, naming the field that
// differs and how to reset it.
func TestIdentityMismatchRefused(t *testing.T) {
	e := newEnv(t)
	base := checkpointAfter(t, e.config(t))
	tests := map[string]struct {
		edit  func(*Config, *cdc.Checkpoint)
		words []string
	}{
		"pipeline edited": {
			func(c *Config, _ *cdc.Checkpoint) { c.Pipeline = `[{"$match":{"operationType":"insert"}}]` },
			[]string{"stream_hash", "tide checkpoint reset"},
		},
		"full document mode": {
			func(c *Config, _ *cdc.Checkpoint) { c.FullDocument = "update_lookup" },
			[]string{"stream_hash"},
		},
		"another cluster": {
			func(_ *Config, cp *cdc.Checkpoint) { cp.Meta["deployment_id"] = "replset:000000000000000000000000" },
			[]string{"deployment_id", "another replica set"},
		},
		"no identity": {
			func(_ *Config, cp *cdc.Checkpoint) { cp.Meta = nil },
			[]string{"no source identity"},
		},
		"another connector": {
			func(_ *Config, cp *cdc.Checkpoint) { cp.Meta["connector"] = "nats" },
			[]string{"connector"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := e.config(t)
			cp := cdc.Checkpoint{Source: base.Source, Meta: map[string]string{}}
			for k, v := range base.Meta {
				cp.Meta[k] = v
			}
			tc.edit(&cfg, &cp)
			src := New(cfg)
			err := src.Open(t.Context(), &cp)
			src.Close()
			wantErr(t, err, ErrIdentity, tc.words...)
		})
	}
}

func TestDropAndRecreateRefused(t *testing.T) {
	e := newEnv(t)
	cp := checkpointAfter(t, e.config(t))
	ctx := context.Background()
	if err := e.coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	src := New(e.config(t))
	err := src.Open(t.Context(), &cp)
	src.Close()
	wantErr(t, err, ErrIdentity, "collection_uuid", "dropped and recreated", "tide snapshot -f FILE", "tide checkpoint reset -f FILE --yes")
}

// Positions from a checkpoint are validated before use.
func TestPositionValidation(t *testing.T) {
	good := `{"_data":"8267C867A3000000012B0429296E1404"}`
	tests := map[string]struct {
		pos   string
		words string // "" for valid
	}{
		"resume token":    {`{"resume_token":` + good + `}`, ""},
		"start after":     {`{"start_after_token":` + good + `}`, ""},
		"snapshot":        {`{"snapshot":{"start_token":` + good + `,"last_id":{"$numberInt":"7"}}}`, ""},
		"snapshot fresh":  {`{"snapshot":{"start_token":` + good + `,"last_id":null}}`, ""},
		"two positions":   {`{"resume_token":` + good + `,"start_after_token":` + good + `}`, "exactly one"},
		"none":            {`{}`, "exactly one"},
		"unknown field":   {`{"seq":4}`, "not a mongo position"},
		"empty token":     {`{"resume_token":""}`, "canonical"},
		"no _data":        {`{"resume_token":{"x":"1"}}`, "no _data"},
		"empty _data":     {`{"resume_token":{"_data":""}}`, "non-empty string"},
		"not canonical":   {`{"resume_token":{"_data":"82","x":1}}`, "canonical"},
		"huge token":      {`{"resume_token":{"_data":"` + strings.Repeat("A", maxTokenBytes) + `"}}`, "more than"},
		"bad last_id":     {`{"snapshot":{"start_token":` + good + `,"last_id":{"$numberInt":"x"}}}`, "last_id"},
		"not json":        {`resume`, "not a mongo position"},
		"relaxed last_id": {`{"snapshot":{"start_token":` + good + `,"last_id":7}}`, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parsePosition(cdc.Position(tc.pos))
			if tc.words == "" {
				if err != nil {
					t.Fatalf("parsePosition: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("parsePosition error = %v, want one mentioning %q", err, tc.words)
			}
		})
	}
}

func TestTokenTime(t *testing.T) {
	ts, ok := positionTime(cdc.Position(`{"resume_token":{"_data":"8267C867A3000000012B0429296E1404"}}`))
	if !ok || ts.T != 0x67C867A3 || ts.I != 1 {
		t.Fatalf("positionTime = %v %v, want {0x67C867A3 1}", ts, ok)
	}
	if _, ok := positionTime(cdc.Position(`{"resume_token":{"_data":"zz"}}`)); ok {
		t.Fatal("positionTime accepted a malformed token")
	}
	var p position
	if err := json.Unmarshal(resumePos([]byte{5, 0, 0, 0, 0}), &p); err == nil && p.ResumeToken == nil {
		t.Fatal("resumePos of an empty token lost the field")
	}
}
