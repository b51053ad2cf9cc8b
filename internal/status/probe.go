package status

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tide-cdc/tide/pipeline"
)

// The probes, /healthz and /readyz, answer as Kubernetes expects, and
// without authentication even where --http-auth-file protects the rest:
// a kubelet reaches the pod's address with no credentials. So they
// reveal the state alone, never an error message or a name.

// probeStale is how long the server's loop may go without a tick before
// /healthz says the process is stuck.
const probeStale = 10 * time.Second

// probes routes /healthz and /readyz to the server's answers, and
// everything else to next.
func (s *Server) probes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			switch r.URL.Path {
			case "/healthz":
				s.serveHealthz(w)
				return
			case "/readyz":
				s.serveReadyz(w)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// probeAnswer is the body of both probes.
type probeAnswer struct {
	Status string `json:"status"`           // ok, or the state that is not
	Reason string `json:"reason,omitempty"` // why not, in words that name no secret
}

func writeProbe(w http.ResponseWriter, code int, a probeAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// serveHealthz answers 200 while the server's loop (which samples every
// pipeline each second) runs; a process whose loop is stuck is not
// alive.
func (s *Server) serveHealthz(w http.ResponseWriter) {
	last := s.tick.Load()
	if last != 0 && time.Since(time.Unix(0, last)) > probeStale {
		writeProbe(w, http.StatusServiceUnavailable, probeAnswer{Status: "stuck", Reason: "the status loop has not run for " + time.Since(time.Unix(0, last)).Round(time.Second).String()})
		return
	}
	writeProbe(w, http.StatusOK, probeAnswer{Status: "ok"})
}

// serveReadyz answers 200 once every pipeline is ready (both ends open,
// neither retrying), 503 with the reason otherwise. A server of metrics
// alone asks its Ready function, if any.
func (s *Server) serveReadyz(w http.ResponseWriter) {
	if s.ready != nil {
		if ok, reason := s.ready(); !ok {
			writeProbe(w, http.StatusServiceUnavailable, probeAnswer{Status: "not ready", Reason: reason})
			return
		}
	}
	ts := s.snapshot()
	if len(ts) == 0 && s.page {
		writeProbe(w, http.StatusServiceUnavailable, probeAnswer{Status: "starting", Reason: "no pipeline is running yet"})
		return
	}
	for _, t := range ts {
		if ok, state, reason := t.ready(); !ok {
			writeProbe(w, http.StatusServiceUnavailable, probeAnswer{Status: state, Reason: reason})
			return
		}
	}
	writeProbe(w, http.StatusOK, probeAnswer{Status: "ok"})
}

// ready reports whether the tracked pipeline is ready, and if not its
// state and why, without names or error text.
func (t *Tracker) ready() (ok bool, state, reason string) {
	t.mu.Lock()
	p := t.p
	t.mu.Unlock()
	if p == nil {
		return false, pipeline.Starting.String(), "the pipeline is being built"
	}
	st := p.State()
	if r, ok := p.(interface{ Ready() bool }); ok {
		if r.Ready() {
			return true, st.String(), ""
		}
	} else if st == pipeline.Running || st == pipeline.Paused || st == pipeline.Draining {
		return true, st.String(), ""
	}
	switch st {
	case pipeline.Degraded:
		if h, ok := p.(healthReporter); ok {
			return false, st.String(), "the " + h.Health().Component + " is retrying"
		}
		return false, st.String(), "the source or the sink is retrying"
	case pipeline.Starting:
		return false, st.String(), "the source and the sink are not open yet"
	}
	return false, st.String(), "the pipeline is " + st.String()
}

// healthReporter is a pipeline that knows its ends' retries.
type healthReporter interface {
	Health() pipeline.Health
}
