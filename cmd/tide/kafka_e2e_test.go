package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/internal/testenv"
)

// kafkaCluster starts an in-process Kafka cluster (kfake) that outlives
// the tide processes the test starts and kills.
func kafkaCluster(t *testing.T, brokers int) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// kcatRead reads the whole of topic with kcat (librdkafka), with
// read_committed, each record printed in format (kcat's -f).
func kcatRead(t *testing.T, brokers, topic, format string) []byte {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		testenv.Need(t, "kcat", fmt.Errorf("%w (apt-get install kcat)", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", brokers, "-t", topic, "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", format)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// kcatSeqs reads topic with kcat (librdkafka), read_committed, and
// returns the generate source's seq of each record, by partition, in
// the order read.
func kcatSeqs(t *testing.T, brokers, topic string) map[int][]int64 {
	t.Helper()
	out := kcatRead(t, brokers, topic, "%p\x1f%s\x1e")
	seqs := map[int][]int64{}
	for _, rec := range strings.Split(string(out), "\x1e") {
		if rec == "" {
			continue
		}
		p, value, _ := strings.Cut(rec, "\x1f")
		var part int
		fmt.Sscan(p, &part)
		var line struct {
			Doc struct {
				Seq int64 `json:"seq"`
			} `json:"_full_document"`
		}
		if err := json.Unmarshal([]byte(value), &line); err != nil || line.Doc.Seq == 0 {
			t.Fatalf("record %q: %v", value, err)
		}
		seqs[part] = append(seqs[part], line.Doc.Seq)
	}
	return seqs
}

// checkExactlyOnce requires seqs to hold 1..total each once, increasing
// within each partition.
func checkExactlyOnce(t *testing.T, seqs map[int][]int64, total int64) {
	t.Helper()
	seen := make(map[int64]int, total)
	for p, s := range seqs {
		for i, v := range s {
			if i > 0 && v <= s[i-1] {
				t.Fatalf("partition %d: seq %d read after %d", p, v, s[i-1])
			}
			seen[v]++
		}
	}
	var dups, missing []int64
	for v := int64(1); v <= total; v++ {
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dups = append(dups, v)
		}
	}
	if len(seen) > int(total) || len(dups) > 0 || len(missing) > 0 {
		t.Fatalf("%d distinct seqs, want %d; %d duplicated (first %v), %d missing (first %v)",
			len(seen), total, len(dups), dups[:min(len(dups), 5)], len(missing), missing[:min(len(missing), 5)])
	}
}

// TestKafkaExactlyOnceSIGKILL is the exactly-once-into-Kafka test: tide
// runs generate → Kafka with checkpoint: sink and is SIGKILLed at random
// moments 8 times, then runs to the end; kcat, reading with
// read_committed, sees every event exactly once, in order in each
// partition.
func TestKafkaExactlyOnceSIGKILL(t *testing.T) {
	const total = 60000
	brokers := kafkaCluster(t, 3)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: crash
source:
  generate: {count: %d, rate: 10000, payload_bytes: 50}
sink:
  kafka: {brokers: [%s], partitions: 3}
checkpoint: sink
batch: {max_records: 500, commit_interval: 20ms}
`, total, brokers))
	sigkillRuns(t, dir, 8, 150*time.Millisecond, 300*time.Millisecond, "run", "-f", cfg, "--progress", "never")
	out, err := runTide(t, dir, "run", "-f", cfg, "--progress", "never")
	if err != nil {
		t.Fatalf("final tide run: %v\n%s", err, out)
	}
	checkExactlyOnce(t, kcatSeqs(t, brokers, "crash.gen.events"), total)

	out, err = runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"seq": %d`, total)) && !strings.Contains(out, fmt.Sprintf(`"seq":%d`, total)) {
		t.Fatalf("tide checkpoint show: %v\n%s", err, out)
	}
}

// TestKafkaZombieFenced: a tide frozen with SIGSTOP while a second one
// takes the pipeline over (another data directory: another machine) is
// fenced by the cluster when it resumes: it fails, and nothing it writes
// after the takeover becomes visible.
func TestKafkaZombieFenced(t *testing.T) {
	const total = 30000
	brokers := kafkaCluster(t, 1)
	dir := t.TempDir()
	pipeline := func(dataDir string) string {
		return fmt.Sprintf(`
name: zombie
source:
  generate: {count: %d, rate: 10000, payload_bytes: 50}
sink:
  kafka: {brokers: [%s], partitions: 2}
checkpoint: sink
data_dir: %s
batch: {max_records: 200, commit_interval: 20ms}
`, total, brokers, dataDir)
	}
	cfgA := writePipeline(t, dir, pipeline("./a"))
	zombie := tideCmd(t, dir, "run", "-f", cfgA, "--progress", "never")
	var zombieErr testenv.Buffer
	zombie.Stderr = &zombieErr
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- zombie.Wait() }()
	before := waitCommitted(t, brokers, "zombie.gen.events", 1) // some batches committed
	time.Sleep(50 * time.Millisecond)                           // and, likely, one open
	if err := zombie.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v\n%s", err, zombieErr.String())
	}

	cfgB := filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(cfgB, []byte(pipeline("./b")), 0o644); err != nil {
		t.Fatal(err)
	}
	next := tideCmd(t, dir, "run", "-f", cfgB, "--progress", "never")
	var nextErr testenv.Buffer
	next.Stderr = &nextErr
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	nextDone := make(chan error, 1)
	go func() { nextDone <- next.Wait() }()
	waitCommitted(t, brokers, "zombie.gen.events", before+1000) // the takeover, and batches of its own

	if err := zombie.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(zombieErr.String(), "fenced") {
			t.Fatalf("the resumed zombie: %v, want a failure saying it was fenced\n%s", err, zombieErr.String())
		}
		t.Logf("the resumed zombie: %s", lastLine(zombieErr.String()))
	case <-time.After(90 * time.Second):
		t.Fatalf("the resumed zombie did not stop\n%s", zombieErr.String())
	}
	select {
	case err := <-nextDone:
		if err != nil {
			t.Fatalf("the second tide: %v\n%s", err, nextErr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the second tide did not finish\n%s", nextErr.String())
	}
	checkExactlyOnce(t, kcatSeqs(t, brokers, "zombie.gen.events"), total)
}

// TestKafkaCheckpointCommands: tide checkpoint show, set and reset reach
// the checkpoint record in the tide_checkpoints topic.
func TestKafkaCheckpointCommands(t *testing.T) {
	t.Parallel()
	brokers := kafkaCluster(t, 1)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: gen-kafka
source:
  generate: {count: 1200}
sink:
  kafka: {brokers: [`+brokers+`]}
checkpoint: sink
`)
	if out, err := runTide(t, dir, "run", "-f", cfg, "--progress", "never"); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, `"seq":1200`) && !strings.Contains(out, `"seq": 1200`) {
		t.Fatalf("tide checkpoint show: %v\n%s", err, out)
	}
	out, err = runTide(t, dir, "checkpoint", "reset", "-f", cfg, "--yes")
	if err != nil || !strings.Contains(out, `checkpoint of pipeline "gen-kafka" reset in the checkpoint topic "tide_checkpoints" of sink.kafka`) {
		t.Fatalf("tide checkpoint reset: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "gen-kafka" has no checkpoint`) {
		t.Fatalf("tide checkpoint show after reset: %v\n%s", err, out)
	}
}

// waitCommitted waits until topic's partitions hold at least n offsets
// below their last stable offsets (records and transaction markers), and
// returns how many they hold.
func waitCommitted(t *testing.T, brokers, topic string, n int64) int64 {
	t.Helper()
	// Metadata refreshed at once: the topic appears while this waits.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err := adm.ListCommittedOffsets(ctx, topic)
		cancel()
		var sum int64
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil && o.Offset > 0 {
					sum += o.Offset
				}
			})
		}
		if sum >= n {
			return sum
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: %d committed offsets after a minute, want %d (%v)", topic, sum, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// TestKafkaBrokerRestart: the cluster (kfake, persisting to a directory)
// is shut down under a running tide with checkpoint: sink and started
// again on the same port; tide rides the outage out and finishes, and
// kcat sees every event exactly once.
func TestKafkaBrokerRestart(t *testing.T) {
	const total = 40000
	data := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(data))
	if err != nil {
		t.Fatal(err)
	}
	brokers := c.ListenAddrs()[0]
	_, port, _ := strings.Cut(brokers, ":")
	var portN int
	fmt.Sscan(port, &portN)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: restart
source:
  generate: {count: %d, rate: 10000, payload_bytes: 50}
sink:
  kafka: {brokers: [%s], partitions: 2, max_outage: 60s}
checkpoint: sink
batch: {max_records: 500, commit_interval: 20ms}
`, total, brokers))
	cmd := tideCmd(t, dir, "run", "-f", cfg, "--progress", "never")
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	time.Sleep(1500 * time.Millisecond)
	c.Close()
	time.Sleep(1500 * time.Millisecond)
	c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(data), kfake.Ports(portN))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("tide run after the cluster's restart: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("tide run did not finish\n%s", stderr.String())
	}
	checkExactlyOnce(t, kcatSeqs(t, brokers, "restart.gen.events"), total)
}
