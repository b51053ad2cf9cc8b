package tide

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the real
// protobuf requests the exporter sends to /v1/traces.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func startReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s (%s)", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Error(err)
			return
		}
		var ex coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			t.Errorf("decode OTLP: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.services = append(r.services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func runTraced(t *testing.T, endpoint, extra string) {
	t.Helper()
	dir := t.TempDir()
	spec, err := Parse(fmt.Appendf(nil, `
name: traced
data_dir: %q
source:
  generate: {count: 300}
sink:
  file: {path: %q}
batch: {max_records: 100}
telemetry: {otlp_endpoint: %q%s}
`, filepath.Join(dir, "data"), filepath.Join(dir, "out.jsonl"), endpoint, extra), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err != nil { // Run closes the pipeline, which flushes the spans
		t.Fatal(err)
	}
}

// With telemetry.otlp_endpoint, each batch reaches an OTLP/HTTP receiver
// as a tide.batch span with its records and its stages as children.
func TestTracingOTLP(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	runTraced(t, r.URL, "")
	r.mu.Lock()
	defer r.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range r.spans {
		byID[string(s.SpanId)] = s
	}
	records := int64(0)
	children := map[string]int{}
	for _, s := range r.spans {
		if s.Name == "tide.batch" {
			for _, a := range s.Attributes {
				if a.Key == "tide.records" {
					records += a.GetValue().GetIntValue()
				}
			}
			continue
		}
		parent := byID[string(s.ParentSpanId)]
		if parent == nil || parent.Name != "tide.batch" || string(parent.TraceId) != string(s.TraceId) {
			t.Errorf("span %s has no tide.batch parent", s.Name)
		}
		children[s.Name]++
	}
	if records != 300 {
		t.Errorf("batch spans carry %d records, want 300", records)
	}
	for _, name := range []string{"read", "encode", "put", "commit", "checkpoint save"} {
		if children[name] < 3 {
			t.Errorf("%d %q spans, want one per batch (at least 3): %v", children[name], name, children)
		}
	}
	if len(r.services) == 0 || r.services[0] != "tide" {
		t.Errorf("service.name %v, want tide", r.services)
	}
}

// sample_ratio 0 traces nothing: the option is not ignored.
func TestTracingSampleRatioZero(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	runTraced(t, r.URL, ", sample_ratio: 0")
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spans) != 0 {
		t.Errorf("%d spans exported with sample_ratio 0", len(r.spans))
	}
}

// A bad endpoint or ratio is refused when the pipeline is built or parsed.
func TestTracingBadConfig(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("name: p\nsource: {generate: {}}\nsink: {stdout: {}}\ntelemetry: {sample_ratio: 2}\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "telemetry.sample_ratio: 2 is not between 0 and 1") {
		t.Errorf("sample_ratio 2: %v", err)
	}
	s, err := Parse([]byte("name: p\nsource: {generate: {}}\nsink: {stdout: {}}\ntelemetry: {otlp_endpoint: 'ftp://x:1'}\ndata_dir: "+t.TempDir()+"\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Build(t.Context()); err == nil || !strings.Contains(err.Error(), "telemetry.otlp_endpoint") {
		t.Errorf("ftp endpoint: %v", err)
	}
}

// grpcReceiver is an OTLP/gRPC trace receiver.
type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// With a grpc:// endpoint the spans go over OTLP/gRPC.
func TestTracingOTLPgRPC(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &grpcReceiver{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln) // ends with GracefulStop
	defer srv.GracefulStop()
	runTraced(t, "grpc://"+ln.Addr().String(), "")
	r.mu.Lock()
	defer r.mu.Unlock()
	batches := 0
	for _, n := range r.names {
		if n == "tide.batch" {
			batches++
		}
	}
	if batches < 3 {
		t.Errorf("%d tide.batch spans over gRPC (%d spans in all), want at least 3", batches, len(r.names))
	}
}
