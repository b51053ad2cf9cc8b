package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("method %s, want GET", r.Method)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/sick", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close) // after the parallel subtests
	closed := httptest.NewServer(mux)
	closed.Close()

	tests := map[string]struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		"2xx":            {args: []string{"--url", srv.URL + "/healthz"}, wantCode: 0},
		"503":            {args: []string{"--url", srv.URL + "/sick"}, wantCode: 1, wantErr: "503 Service Unavailable"},
		"404":            {args: []string{"--url", srv.URL + "/nothing"}, wantCode: 1, wantErr: "404 Not Found"},
		"nobody listens": {args: []string{"--url", closed.URL + "/healthz"}, wantCode: 1, wantErr: "connection refused"},
		"too slow":       {args: []string{"--url", srv.URL + "/slow", "--timeout", "100ms"}, wantCode: 1, wantErr: "deadline exceeded"},
		"bad URL":        {args: []string{"--url", "::"}, wantCode: 1, wantErr: "missing protocol scheme"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"healthcheck"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.wantCode, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
			if tt.wantErr == "" && stderr.Len() != 0 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr: %q, want %q", stderr.String(), tt.wantErr)
			}
		})
	}
}
