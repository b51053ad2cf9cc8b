package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/redact"
)

// httpAddrFile is the file in a pipeline's data directory where tide run
// records the address it serves HTTP on, for tide snapshot.
const httpAddrFile = "http-address"

func writeHTTPAddr(dataDir, addr string) error {
	path := filepath.Join(dataDir, httpAddrFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeHTTPAddr removes the file if it still names addr, or whatever
// it names with addr "".
func removeHTTPAddr(dataDir, addr string) {
	path := filepath.Join(dataDir, httpAddrFile)
	if b, err := os.ReadFile(path); err == nil && (addr == "" || strings.TrimSpace(string(b)) == addr) {
		os.Remove(path)
	}
}

func readHTTPAddr(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, httpAddrFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// snapshotFlags are tide snapshot's flags for an incremental snapshot.
type snapshotFlags struct {
	collections []string
	filter      string
	chunk       int
	httpAddr    string
	authFile    string
}

// requestSnapshot asks the running pipeline for an incremental snapshot
// through its HTTP address (--http-addr, or the one it recorded in its
// data directory); when no pipeline answers there, it records the request
// in the stopped pipeline's checkpoint for the next run.
func requestSnapshot(cmd *cobra.Command, secrets *redact.Set, file string, f snapshotFlags) error {
	spec, err := readPipeline(file, secrets)
	if err != nil {
		return err
	}
	if f.chunk < 0 {
		return fmt.Errorf("--chunk %d: want a positive number of documents", f.chunk)
	}
	req := cdc.SnapshotRequest{Collections: f.collections, Chunk: f.chunk}
	if f.filter != "" {
		if !json.Valid([]byte(f.filter)) || !strings.HasPrefix(strings.TrimSpace(f.filter), "{") {
			return fmt.Errorf("--filter %q is not a JSON object (a query document in relaxed Extended JSON, such as '{\"status\": \"open\"}')", f.filter)
		}
		req.Filter = []byte(f.filter)
	}
	out := cmd.OutOrStdout()
	addr, recorded := f.httpAddr, false
	if addr == "" {
		addr, recorded = readHTTPAddr(spec.DataDir), true
	}
	if addr != "" {
		id, err := postSnapshot(cmd.Context(), addr, f.authFile, req)
		// A pipeline starting up answers 503 until its source is open.
		for deadline := time.Now().Add(30 * time.Second); errors.Is(err, errNotReady) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			id, err = postSnapshot(cmd.Context(), addr, f.authFile, req)
		}
		switch {
		case err == nil:
			fmt.Fprintf(out, "incremental snapshot %s of pipeline %q requested from the running pipeline at %s; follow it with GET /api/snapshots\n", id, spec.Name, addr)
			return nil
		case recorded && errors.Is(err, syscall.ECONNREFUSED):
			// The pipeline that recorded the address is gone.
		default:
			return fmt.Errorf("pipeline %q at %s: %w", spec.Name, addr, err)
		}
	}
	r, ok := spec.Source.Config.(tide.SnapshotRecorder)
	if !ok {
		return fmt.Errorf("pipeline %q: source.%s takes no incremental snapshots", spec.Name, spec.Source.Key)
	}
	store, err := spec.Checkpoints(cmd.Context())
	if err != nil {
		return err
	}
	defer store.Close()
	var id string
	err = store.Rewrite(cmd.Context(), func(cp *cdc.Checkpoint) (*cdc.Checkpoint, error) {
		if cp != nil && cp.Meta != nil {
			m := make(map[string]string, len(cp.Meta)+2)
			for k, v := range cp.Meta {
				m[k] = v
			}
			cp.Meta = m
		}
		var err error
		if id, err = r.RecordSnapshot(cp, req, time.Now()); err != nil {
			return nil, fmt.Errorf("pipeline %q: %w", spec.Name, err)
		}
		return cp, nil
	})
	if err != nil {
		return fmt.Errorf("%w (the pipeline answers no HTTP address: start it with --http-addr to ask it while it runs)", err)
	}
	fmt.Fprintf(out, "incremental snapshot %s of pipeline %q recorded in its checkpoint (%s): the next tide run %s carries it out\n", id, spec.Name, store.Where(), file)
	return nil
}

// errNotReady is postSnapshot's error for a pipeline still starting.
var errNotReady = errors.New("not ready")

// postSnapshot sends POST /api/snapshots.
func postSnapshot(ctx context.Context, addr, authFile string, req cdc.SnapshotRequest) (string, error) {
	body := map[string]any{"collections": req.Collections}
	if req.Filter != nil {
		body["filter"] = json.RawMessage(req.Filter)
	}
	if req.Chunk > 0 {
		body["chunk"] = req.Chunk
	}
	b, _ := json.Marshal(body)
	base := addr
	if !strings.Contains(base, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		base = "http://" + addr
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/api/snapshots", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	hr.Header.Set("Content-Type", "application/json")
	if authFile != "" {
		user, pass, err := readCredentials(authFile)
		if err != nil {
			return "", err
		}
		hr.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var answer struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	_ = json.Unmarshal(rb, &answer)
	if resp.StatusCode != http.StatusCreated {
		msg := answer.Error
		if msg == "" {
			msg = strings.TrimSpace(string(rb))
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			return "", fmt.Errorf("%w (%s): %s", errNotReady, resp.Status, msg)
		}
		return "", fmt.Errorf("refused (%s): %s", resp.Status, msg)
	}
	return answer.ID, nil
}

// readCredentials reads user:password from the first line of a file.
func readCredentials(path string) (string, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("--http-auth-file: %w", err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	user, pass, ok := strings.Cut(strings.TrimSpace(line), ":")
	if !ok || user == "" {
		return "", "", fmt.Errorf("--http-auth-file %s: want one user:password line", path)
	}
	return user, pass, nil
}
