package tide

import (
	"strings"
	"testing"
)

func TestSpecCheckpointKey(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"NATS_TOKEN": "s3cret"}
	const head = "name: p\nsource: {generate: {count: 1}}\nsink: {file: {path: out.jsonl}}\n"
	tests := map[string]struct {
		yaml       string
		want       []string // substrings of the error; none for a valid file
		checkpoint string   // Spec.Checkpoint of a valid file
	}{
		"default":  {yaml: head, checkpoint: "file"},
		"file":     {yaml: head + "checkpoint: file\n", checkpoint: "file"},
		"sink":     {yaml: head + "checkpoint: sink\n", want: []string{`line 4: checkpoint: "sink" needs a sink that stores checkpoints`}},
		"unknown":  {yaml: head + "checkpoint: etcd\n", want: []string{`line 4: checkpoint: "etcd" is not one of file, sink, or the mapping {nats_kv: ...}`}},
		"kv flow":  {yaml: head + "checkpoint: {nats_kv: {servers: [nats://127.0.0.1:4222], bucket: tide_checkpoints, replicas: 3}}\n", checkpoint: "nats_kv"},
		"kv block": {yaml: head + "checkpoint:\n  nats_kv:\n    servers: [nats://a:4222, nats://b:4222]\n    auth: {token: \"${NATS_TOKEN}\"}\n    tls: {ca_file: ca.pem}\n", checkpoint: "nats_kv"},
		"kv as a string": {yaml: head + "checkpoint: nats_kv\n", want: []string{
			"line 4: checkpoint: nats_kv takes settings: write checkpoint: {nats_kv: {servers: [nats://127.0.0.1:4222], bucket: tide_checkpoints, replicas: 3}}"}},
		"empty mapping": {yaml: head + "checkpoint: {}\n", want: []string{"line 4: checkpoint: nats_kv takes settings"}},
		"unknown store": {yaml: head + "checkpoint: {nats_k: {servers: [x]}}\n", want: []string{"line 4: checkpoint.nats_k: unknown key (did you mean nats_kv?)"}},
		"no servers":    {yaml: head + "checkpoint: {nats_kv: {bucket: b}}\n", want: []string{"checkpoint.nats_kv.servers: required"}},
		"bad servers": {yaml: head + "checkpoint:\n  nats_kv:\n    servers: [\"nats://a b\", \"\"]\n", want: []string{
			`line 6: checkpoint.nats_kv.servers[0]: "nats://a b" is not a server URL`, `checkpoint.nats_kv.servers[1]: "" is not a server URL`}},
		"servers not a list": {yaml: head + "checkpoint: {nats_kv: {servers: {a: 1}}}\n", want: []string{"checkpoint.nats_kv.servers: expected a list, got a mapping"}},
		"replicas 0":         {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], replicas: 0}}\n", want: []string{"checkpoint.nats_kv.replicas: 0 is out of range: want 1 to 5"}},
		"replicas 6":         {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], replicas: 6}}\n", want: []string{"checkpoint.nats_kv.replicas: 6 is out of range: want 1 to 5"}},
		"replicas text":      {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], replicas: three}}\n", want: []string{`checkpoint.nats_kv.replicas: "three" is not an integer`}},
		"bad bucket":         {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], bucket: \"a.b\"}}\n", want: []string{`checkpoint.nats_kv.bucket: "a.b" is not a legal bucket name`}},
		"unknown kv key":     {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], bukket: b}}\n", want: []string{"checkpoint.nats_kv.bukket: unknown key (did you mean bucket?)"}},
		"auth": {yaml: head + "checkpoint: {nats_kv: {servers: [nats://x:4222], auth: {token: t, user: u}, tls: {key_file: k}}}\n", want: []string{
			"checkpoint.nats_kv.auth: set only one of", "checkpoint.nats_kv.tls: cert_file and key_file go together"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, vars)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if s.Checkpoint != tc.checkpoint {
					t.Errorf("Checkpoint = %q, want %q", s.Checkpoint, tc.checkpoint)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", s)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}

	s, err := parseSpec(tests["kv flow"].yaml, vars)
	if err != nil {
		t.Fatal(err)
	}
	kv := s.cfg.CheckpointStore.NATSKV
	if s.Checkpoint != "nats_kv" || kv == nil || kv.Bucket != "tide_checkpoints" || kv.Replicas != 3 || len(kv.Servers) != 1 {
		t.Fatalf("checkpoint = %q, %+v", s.Checkpoint, kv)
	}
	s, err = parseSpec(tests["kv block"].yaml, vars)
	if err != nil {
		t.Fatal(err)
	}
	kv = s.cfg.CheckpointStore.NATSKV
	if kv.Bucket != "tide_checkpoints" || kv.Replicas != 1 || kv.Auth.Token != "s3cret" || kv.TLS.CAFile != "ca.pem" {
		t.Fatalf("defaults and auth: %+v", kv)
	}
	// The token is a secret, to redact; written inline it is warned about.
	if got := s.Secrets(); len(got) != 1 || got[0] != "s3cret" {
		t.Errorf("Secrets = %q, want the token", got)
	}
	s, err = parseSpec(head+"checkpoint: {nats_kv: {servers: [\"nats://u:pw@x:4222\"], auth: {token: inline}}}\n", vars)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(s.Warnings(), "\n"); !strings.Contains(w, "checkpoint.nats_kv.auth.token: a token is written inline") ||
		!strings.Contains(w, "checkpoint.nats_kv.servers[0]: a password is written inline") {
		t.Errorf("Warnings = %q", w)
	}
}
