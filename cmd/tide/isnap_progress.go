package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// incrementalProgress is the status line's word on the running
// incremental snapshots: "snapshot 3 12000/40000 docs 30% 2400/s ETA 11 s".
func incrementalProgress(src cdc.Source) string {
	is, ok := src.(cdc.IncrementalSnapshotter)
	if !ok {
		return ""
	}
	var parts []string
	for _, in := range is.Snapshots() {
		if in.State != cdc.SnapshotRunning {
			continue
		}
		total := max(in.TotalDocuments, in.DoneDocuments)
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(in.DoneDocuments) / float64(total)
		}
		eta := "ETA --"
		if in.ETASeconds > 0 {
			eta = "ETA " + humanDuration(time.Duration(in.ETASeconds*float64(time.Second)))
		}
		parts = append(parts, fmt.Sprintf("snapshot %s %d/%d docs %.0f%% %.0f/s %s", in.ID, in.DoneDocuments, total, pct, in.Rate, eta))
	}
	return strings.Join(parts, "  ")
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "  " + b
}
