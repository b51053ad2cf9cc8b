package deadletter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func letter(t *testing.T, seq int) cdc.DeadLetter {
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: int32(seq)}, {Key: "d", Value: bson.NewDateTimeFromTime(time.UnixMilli(1700000000123))}, {Key: "n", Value: int64(1) << 40}})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(seq)}})
	return cdc.DeadLetter{
		Event: cdc.Event{Pos: cdc.Position(`{"seq":` + string(rune('0'+seq)) + `}`), Op: cdc.OpInsert, Namespace: "shop.orders",
			ClusterTime: cdc.Timestamp{T: 5, I: 6}, WallTimeMS: 7, DocumentKey: key, FullDocument: doc},
		Stage: "transform", Err: "no such overload", Time: time.Unix(1700000000, 0),
	}
}

func TestFileKeepsEachLetterOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl", "dead.jsonl")
	f, err := OpenFile(path, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 1), letter(t, 2), letter(t, 1)}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// A crash mid-line: the torn line is cut, and the batch, read again,
	// writes its letters again; the first is kept once.
	if err := appendTo(path, `{"id":"torn`); err != nil {
		t.Fatal(err)
	}
	f, err = OpenFile(path, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 2), letter(t, 3)}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 4)}); err == nil {
		t.Fatal("Write after Close succeeded")
	}

	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].Position) != `{"seq":1}` || string(got[2].Position) != `{"seq":3}` {
		t.Fatalf("letters = %+v", got)
	}
	// The change comes back as it was, BSON types and all.
	ev, err := got[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	want := letter(t, 1).Event
	if string(ev.FullDocument) != string(want.FullDocument) || string(ev.DocumentKey) != string(want.DocumentKey) ||
		ev.Op != want.Op || ev.Namespace != want.Namespace || ev.ClusterTime != want.ClusterTime || ev.WallTimeMS != 7 || string(ev.Pos) != string(want.Pos) {
		t.Fatalf("event = %+v\nwant %+v", ev, want)
	}
	if got[0].Stage != "transform" || got[0].Error != "no such overload" || got[0].Pipeline != "p" || got[0].Namespace != "shop.orders" {
		t.Fatalf("letter = %+v", got[0])
	}
}

func TestFileUnwritable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(filepath.Join(dir, "x", "dead.jsonl"), "p"); err == nil || !strings.Contains(err.Error(), "dead-letter file") {
		t.Fatalf("OpenFile under a file = %v", err)
	}
}

func appendTo(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func TestNATSKeepsEachLetterOnce(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}

	c := NATSConfig{Pipeline: "p", Servers: []string{srv.ClientURL()}, Subject: "dlq.p"}
	n, err := OpenNATS(c)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time is a replay after a crash
		if err := n.Write(t.Context(), []cdc.DeadLetter{letter(t, 1), letter(t, 2)}); err != nil {
			t.Fatal(err)
		}
	}
	n.Close()
	got, err := ReadNATS(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[1].Position) != `{"seq":2}` {
		t.Fatalf("letters = %+v", got)
	}

	// A subject no stream captures: the publish fails, and says so.
	bad, err := OpenNATS(NATSConfig{Pipeline: "p", Servers: []string{srv.ClientURL()}, Subject: "nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := bad.Write(ctx, []cdc.DeadLetter{letter(t, 1)}); err == nil || !strings.Contains(err.Error(), "publish dead letter to nowhere") {
		t.Fatalf("Write to an uncaptured subject = %v", err)
	}
}

// TestFileDiskFull: a Write that fills the disk part-way through a line
// fails naming the file and ENOSPC, and takes its part back: once space is
// freed, the batch's letters, written again, are whole, and every letter
// reads back, then and after a reopen.
func TestFileDiskFull(t *testing.T) {
	disk := faultfs.NewDisk()
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	f, err := OpenFileFS(disk, path, "p")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 1)}); err != nil {
		t.Fatal(err)
	}
	disk.Fill(100) // less than a letter's line
	err = f.Write(t.Context(), []cdc.DeadLetter{letter(t, 2), letter(t, 3)})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write on a full disk = %v, want ENOSPC naming %s", err, path)
	}
	disk.Fill(-1) // space freed
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 2), letter(t, 3)}); err != nil {
		t.Fatalf("Write once space is freed: %v", err)
	}
	check := func(when string) {
		t.Helper()
		got, err := ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		var pos []string
		for _, l := range got {
			pos = append(pos, string(l.Position))
		}
		if strings.Join(pos, " ") != `{"seq":1} {"seq":2} {"seq":3}` {
			t.Fatalf("%s: letters at %v, want seq 1, 2, 3 once each", when, pos)
		}
	}
	check("after the disk filled and was freed")
	f.Close()
	f, err = OpenFileFS(disk, path, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(t.Context(), []cdc.DeadLetter{letter(t, 3)}); err != nil { // seen: not written again
		t.Fatal(err)
	}
	check("after a reopen")
}
