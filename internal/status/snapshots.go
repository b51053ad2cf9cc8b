package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tide-cdc/tide/cdc"
)

// The incremental snapshots of a pipeline whose source can take them
// (cdc.IncrementalSnapshotter), behind the same checks as every route:
//
//	POST   /api/snapshots       {"collections": [...], "filter": {...}, "chunk": N} -> 201 {"id": ...}
//	GET    /api/snapshots       -> 200 [{"id", "collections", "state", "done_documents", "total_documents", ...}]
//	DELETE /api/snapshots/{id}  -> 202 {"id": ..., "state": "cancelling"}
//
// A request that changes something needs Content-Type: application/json
// (guardWrites), a DELETE too. ?pipeline=NAME picks a pipeline when the
// server shows more than one.
func (s *Server) snapshotRoutes() {
	s.mux.HandleFunc("POST /api/snapshots", s.postSnapshot)
	s.mux.HandleFunc("GET /api/snapshots", s.listSnapshots)
	s.mux.HandleFunc("DELETE /api/snapshots/{id}", s.cancelSnapshot)
}

// maxSnapshotRequest bounds the body of POST /api/snapshots.
const maxSnapshotRequest = 1 << 20

// snapshotter returns the source of the pipeline a request names (or the
// only one) that takes incremental snapshots.
func (s *Server) snapshotter(r *http.Request) (cdc.IncrementalSnapshotter, error) {
	name := r.URL.Query().Get("pipeline")
	var found []cdc.IncrementalSnapshotter
	for _, t := range s.snapshot() {
		t.mu.Lock()
		tname, src := t.name, t.src
		t.mu.Unlock()
		if name != "" && tname != name {
			continue
		}
		if is, ok := src.(cdc.IncrementalSnapshotter); ok {
			found = append(found, is)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return nil, errors.New("more than one pipeline takes incremental snapshots here: name one with ?pipeline=NAME")
	case name != "":
		return nil, fmt.Errorf("no pipeline %q whose source takes incremental snapshots", name)
	}
	return nil, errors.New("no pipeline here whose source takes incremental snapshots (source.mongo does)")
}

func (s *Server) postSnapshot(w http.ResponseWriter, r *http.Request) {
	is, err := s.snapshotter(r)
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	var body struct {
		Collections []string        `json:"collections"`
		Filter      json.RawMessage `json:"filter"`
		Chunk       int             `json:"chunk"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSnapshotRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("the body is not a snapshot request {\"collections\": [\"db.coll\"], \"filter\": {...}, \"chunk\": N}: %v", err))
		return
	}
	id, err := is.RequestSnapshot(r.Context(), cdc.SnapshotRequest{Collections: body.Collections, Filter: body.Filter, Chunk: body.Chunk})
	if err != nil {
		writeError(w, snapshotStatus(err), err)
		return
	}
	s.log.Info("incremental snapshot requested over HTTP", "snapshot", id, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	is, err := s.snapshotter(r)
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, http.StatusOK, is.Snapshots())
}

func (s *Server) cancelSnapshot(w http.ResponseWriter, r *http.Request) {
	is, err := s.snapshotter(r)
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	id := r.PathValue("id")
	if err := is.CancelSnapshot(id); err != nil {
		writeError(w, snapshotStatus(err), err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "state": "cancelling"})
}

// snapshotStatus is the HTTP status of an IncrementalSnapshotter's error.
func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, cdc.ErrSnapshotRequest):
		return http.StatusBadRequest
	case errors.Is(err, cdc.ErrSnapshotConflict):
		return http.StatusConflict
	case errors.Is(err, cdc.ErrSnapshotNotFound):
		return http.StatusNotFound
	case errors.Is(err, cdc.ErrSnapshotNotReady):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
