package natskv_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect returns a JetStream context on url, closed when the test ends.
func connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func open(t testing.TB, js jetstream.JetStream, cfg natskv.Config) *natskv.Store {
	t.Helper()
	s, err := natskv.Open(context.Background(), js, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func cp(seq int) cdc.Checkpoint {
	return cdc.Checkpoint{
		Source: cdc.Position(`{"seq":` + strconv.Itoa(seq) + `}`),
		Meta:   map[string]string{"k": "v"},
		Sink:   []byte(`{"committed_bytes":` + strconv.Itoa(seq*10) + `}`),
	}
}

func TestSaveLoadReset(t *testing.T) {
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	s := open(t, js, natskv.Config{})
	if s.Bucket() != natskv.DefaultBucket {
		t.Fatalf("bucket %q, want the default %q", s.Bucket(), natskv.DefaultBucket)
	}
	got, err := s.Load(ctx, "p1")
	if err != nil || got != nil {
		t.Fatalf("Load of a fresh pipeline = %v, %v; want nil, nil", got, err)
	}
	for i := 1; i <= 3; i++ {
		if err := s.Save(ctx, "p1", cp(i)); err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
	}
	// A second Store, as a restarted process would open, reads the last.
	s2 := open(t, js, natskv.Config{})
	got, err = s2.Load(ctx, "p1")
	if err != nil || got == nil || string(got.Source) != `{"seq":3}` || string(got.Sink) != `{"committed_bytes":30}` || got.Meta["k"] != "v" {
		t.Fatalf("Load = %+v, %v; want the third checkpoint", got, err)
	}
	// The value is the same checksummed record as on disk.
	raw, rev, err := s2.Raw(ctx, "p1")
	if err != nil || rev == 0 {
		t.Fatalf("Raw: rev %d, %v", rev, err)
	}
	rec, err := checkpoint.Decode("kv", "p1", raw)
	if err != nil || rec.Generation != 3 {
		t.Fatalf("Decode of the stored value: %+v, %v; want generation 3", rec, err)
	}
	// The old Store is now stale: s2 has not saved, so s may go on.
	if err := s.Save(ctx, "p1", cp(4)); err != nil {
		t.Fatalf("Save after another Store only loaded: %v", err)
	}
	if err := s2.Save(ctx, "p1", cp(5)); !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("Save of a Store that loaded revision %d before another saved: %v; want ErrNotOwner", rev, err)
	}

	if err := s.Reset(ctx, "p1"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	got, err = s2.Load(ctx, "p1")
	if err != nil || got != nil {
		t.Fatalf("Load after Reset = %v, %v; want nil, nil", got, err)
	}
	if raw, _, err := s2.Raw(ctx, "p1"); raw != nil || err != nil {
		t.Fatalf("Raw after Reset = %q, %v", raw, err)
	}
	// s forgot its revision in its own Reset: it may start anew.
	if err := s.Save(ctx, "p1", cp(6)); err != nil {
		t.Fatalf("Save by the Store that reset: %v", err)
	}
	if err := s2.Save(ctx, "p1", cp(7)); !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("Save of a Store that loaded the reset key before another saved: %v; want ErrNotOwner", err)
	}
	// Pipelines are independent keys.
	if err := s2.Save(ctx, "p2", cp(1)); err != nil {
		t.Fatalf("Save of another pipeline: %v", err)
	}
}

// TestFence checks the contract the workers rely on: after a new owner
// fences the key, the old owner's next Save fails, naming the pipeline,
// the revisions and the new owner, and nothing it tries overwrites the
// new owner's checkpoint.
func TestFence(t *testing.T) {
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	old := open(t, js, natskv.Config{Bucket: "fence"})
	if _, err := old.Load(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := old.Save(ctx, "p", cp(1)); err != nil {
		t.Fatal(err)
	}

	next := open(t, js, natskv.Config{Bucket: "fence"})
	if err := next.Fence(ctx, "p", "worker-2"); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	got, err := next.Load(ctx, "p")
	if err != nil || got == nil || string(got.Source) != `{"seq":1}` {
		t.Fatalf("Load after Fence = %+v, %v; want the fenced checkpoint unchanged", got, err)
	}
	owner, rev, err := next.Owner(ctx, "p")
	if err != nil || owner != "worker-2" {
		t.Fatalf("Owner = %q, %v; want worker-2", owner, err)
	}

	err = old.Save(ctx, "p", cp(2))
	var no *natskv.NotOwnerError
	if !errors.Is(err, natskv.ErrNotOwner) || !errors.As(err, &no) {
		t.Fatalf("Save of the fenced Store: %v; want a NotOwnerError", err)
	}
	for _, want := range []string{`pipeline "p"`, `bucket "fence"`, `owner "worker-2"`, "revision " + strconv.Itoa(int(rev)), "last saw revision 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %s", err, want)
		}
	}
	// Again, and after a Fence by the same new owner: always refused.
	if err := old.Save(ctx, "p", cp(3)); !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("second Save of the fenced Store: %v", err)
	}

	if err := next.Save(ctx, "p", cp(10)); err != nil {
		t.Fatalf("Save of the new owner: %v", err)
	}
	raw, _, _ := next.Raw(ctx, "p")
	rec, err := checkpoint.Decode("kv", "p", raw)
	if err != nil || rec.Owner != "worker-2" || rec.Generation != 2 || string(rec.Checkpoint().Source) != `{"seq":10}` {
		t.Fatalf("record after the new owner's save: %+v, %v; want owner worker-2, generation 2, seq 10", rec, err)
	}

	// A Store fenced for worker-2 refuses to load the key once another
	// owner fenced it: it would adopt that owner's revision.
	if err := open(t, js, natskv.Config{Bucket: "fence"}).Fence(ctx, "p", "worker-3"); err != nil {
		t.Fatal(err)
	}
	if got, err := next.Load(ctx, "p"); got != nil || !errors.Is(err, natskv.ErrNotOwner) ||
		!strings.Contains(err.Error(), `fenced key "p" for "worker-2"`) || !strings.Contains(err.Error(), `owner "worker-3"`) {
		t.Fatalf("Load of a Store fenced for worker-2 after worker-3 fenced: %v, %v", got, err)
	}
	if err := next.Fence(ctx, "p", "worker-2"); err != nil {
		t.Fatal(err)
	}
	if got, err := next.Load(ctx, "p"); err != nil || string(got.Source) != `{"seq":10}` {
		t.Fatalf("Load after fencing again: %v, %v", got, err)
	}

	// A fence of a pipeline that never saved is a claim: no checkpoint,
	// but a Store that loaded before it is refused.
	early := open(t, js, natskv.Config{Bucket: "fence"})
	if cp, err := early.Load(ctx, "fresh"); cp != nil || err != nil {
		t.Fatalf("Load fresh = %v, %v", cp, err)
	}
	if err := next.Fence(ctx, "fresh", "worker-3"); err != nil {
		t.Fatalf("Fence of a fresh pipeline: %v", err)
	}
	if cp, err := next.Load(ctx, "fresh"); cp != nil || err != nil {
		t.Fatalf("Load of a claimed pipeline = %v, %v; want nil, nil", cp, err)
	}
	if err := early.Save(ctx, "fresh", cp(1)); !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("Save of a Store that loaded before the claim: %v; want ErrNotOwner", err)
	}
	if err := next.Save(ctx, "fresh", cp(1)); err != nil {
		t.Fatalf("Save of the claimant: %v", err)
	}
}

// TestFenceRace fences one key from many Stores at once while its owner
// saves: exactly the last fence wins, every fence succeeds (a concurrent
// write makes it read again), and the checkpoint is never lost.
func TestFenceRace(t *testing.T) {
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	owner := open(t, js, natskv.Config{})
	if err := owner.Save(ctx, "p", cp(1)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 4)
	for i := range 4 {
		go func() {
			s, err := natskv.Open(ctx, js, natskv.Config{})
			if err == nil {
				err = s.Fence(ctx, "p", "w"+strconv.Itoa(i))
			}
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Errorf("concurrent Fence: %v", err)
		}
	}
	if err := owner.Save(ctx, "p", cp(2)); !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("Save after the fences: %v; want ErrNotOwner", err)
	}
	got, err := open(t, js, natskv.Config{}).Load(ctx, "p")
	if err != nil || got == nil || string(got.Source) != `{"seq":1}` {
		t.Fatalf("Load after the fences = %+v, %v; want seq 1", got, err)
	}
}

func TestCorruptRecordRefused(t *testing.T) {
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	s := open(t, js, natskv.Config{})
	if err := s.Save(ctx, "p", cp(1)); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, natskv.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := s.Raw(ctx, "p")
	other, err := checkpoint.Encode("q", 1, "", cp(1), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]struct{ value, reason string }{
		"flipped":   {strings.Replace(string(raw), `"seq": 1`, `"seq": 2`, 1), "checksum mismatch"},
		"truncated": {string(raw[:len(raw)/2]), "truncated"},
		"garbage":   {"hello", "not a checkpoint record"},
		"other":     {string(other), `record is for pipeline "q", not "p"`},
	} {
		if _, err := kv.Put(ctx, "p", []byte(bad.value)); err != nil {
			t.Fatal(err)
		}
		fresh := open(t, js, natskv.Config{})
		got, err := fresh.Load(ctx, "p")
		var ce *checkpoint.CorruptError
		if got != nil || !errors.As(err, &ce) {
			t.Fatalf("%s: Load = %v, %v; want a CorruptError", name, got, err)
		}
		for _, want := range []string{bad.reason, `bucket "tide_checkpoints" key "p"`, "refusing to start"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
		if err := fresh.Fence(ctx, "p", "w"); !errors.As(err, &ce) {
			t.Errorf("%s: Fence of a corrupt record: %v; want a CorruptError", name, err)
		}
	}
}

func TestOpenValidation(t *testing.T) {
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	for _, c := range []struct {
		cfg  natskv.Config
		want string
	}{
		{natskv.Config{Replicas: -1}, "replicas -1: want 1 to 5"},
		{natskv.Config{Replicas: 6}, "replicas 6: want 1 to 5"},
		{natskv.Config{Bucket: "a.b"}, `bucket "a.b": use letters`},
		// A single server cannot hold three replicas.
		{natskv.Config{Bucket: "r3", Replicas: 3}, `open bucket "r3"`},
	} {
		if _, err := natskv.Open(ctx, js, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v; want an error saying %q", c.cfg, err, c.want)
		}
	}
	// An existing bucket with fewer replicas than asked for is refused,
	// not used with less redundancy than configured.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := natskv.Open(ctx, js, natskv.Config{Bucket: "r1", Replicas: 3}); err == nil || !strings.Contains(err.Error(), `bucket "r1" has 1 replicas, the configuration asks for 3`) {
		t.Errorf("Open of an R1 bucket asking for R3 = %v", err)
	}
}

func TestKey(t *testing.T) {
	for name, want := range map[string]string{
		"gen-to-file": "gen-to-file",
		"a.b_c-9":     "a.b_c-9",
		"a.":          "a=2E",
		"a..b":        "a.=2Eb",
		".a":          "=2Ea",
		"a=b":         "a=3Db",
		"a b*>":       "a=20b=2A=3E",
		"":            "=",
	} {
		if got := natskv.Key(name); got != want {
			t.Errorf("Key(%q) = %q, want %q", name, got, want)
		}
	}
	// Every such name is usable.
	ctx := context.Background()
	js := connect(t, testenv.NATS(t).ClientURL())
	s := open(t, js, natskv.Config{})
	for _, name := range []string{"a.", "a..b", ".a", "a b*>"} {
		if err := s.Save(ctx, name, cp(1)); err != nil {
			t.Errorf("Save(%q): %v", name, err)
		}
		if got, err := s.Load(ctx, name); err != nil || got == nil {
			t.Errorf("Load(%q) = %v, %v", name, got, err)
		}
	}
}

// TestReplicatedSaveWithNodeDown saves to an R3 bucket on a 3-node
// cluster while one node is stopped and restarted: no save fails, and
// every Store, connected anywhere, reads the last checkpoint.
func TestReplicatedSaveWithNodeDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.NATSCluster(t, 3)
	js := connect(t, c.URL())
	s := open(t, js, natskv.Config{Replicas: 3})
	if _, err := s.Load(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	seq := 0
	save := func(n int) {
		for range n {
			seq++
			if err := s.Save(ctx, "p", cp(seq)); err != nil {
				t.Fatalf("Save %d: %v", seq, err)
			}
		}
	}
	save(20)
	// Stop the node that leads the bucket's stream, the worst case.
	leader := 0
	for i := range 3 {
		if srv := c.Server(i); srv != nil && srv.JetStreamIsStreamLeader("$G", "KV_"+natskv.DefaultBucket) {
			leader = i
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(20 * time.Millisecond)
		c.Stop(leader)
	}()
	save(50)
	<-done
	save(20)
	c.Restart(leader)
	save(20)
	for i := range 3 {
		js := connect(t, c.URLs()[i])
		got, err := open(t, js, natskv.Config{Replicas: 3}).Load(ctx, "p")
		if err != nil || got == nil || string(got.Source) != `{"seq":`+strconv.Itoa(seq)+`}` {
			t.Fatalf("Load via node %d = %+v, %v; want seq %d", i, got, err, seq)
		}
	}
}

// TestOpenConcurrently: workers starting together each open the missing
// R3 bucket, connected to different nodes; every Open succeeds and all
// of them share one bucket.
func TestOpenConcurrently(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	const n = 6
	errs := make(chan error, n)
	stores := make(chan *natskv.Store, n)
	for i := range n {
		js := connect(t, c.URLs()[i%3])
		go func() {
			s, err := natskv.Open(t.Context(), js, natskv.Config{Bucket: "race", Replicas: 3})
			errs <- err
			stores <- s
		}()
	}
	var all []*natskv.Store
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Open: %v", err)
		}
		all = append(all, <-stores)
	}
	if t.Failed() {
		return
	}
	if err := all[0].Save(t.Context(), "p", cp(1)); err != nil {
		t.Fatal(err)
	}
	for i, s := range all[1:] {
		got, err := s.Load(t.Context(), "p")
		if err != nil || got == nil || string(got.Source) != `{"seq":1}` {
			t.Errorf("store %d: Load = %v, %v; want the checkpoint store 0 saved", i+1, got, err)
		}
	}
}
