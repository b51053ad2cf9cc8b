package retry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

var errDown = errors.New("connection refused")

// Backoff reports each failure, doubles its wait up to Max, gives up
// after MaxElapsed with the last error wrapped, and reports a recovery
// once.
func TestBackoffPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reports []int
		b := &Backoff{
			Policy: cdc.RetryPolicy{Initial: time.Second, Max: 4 * time.Second, MaxElapsed: 20 * time.Second},
			Report: func(attempt int, err error) {
				if (attempt == 0) != (err == nil) {
					t.Errorf("report(%d, %v): a failure has an error, a recovery none", attempt, err)
				}
				reports = append(reports, attempt)
			},
		}
		start := time.Now()
		var err error
		for err == nil {
			err = b.Fail(t.Context(), errDown)
		}
		took := time.Since(start)
		if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "retry.max_elapsed 20s") {
			t.Errorf("gave up with %v, want the last error and the setting named", err)
		}
		if took != 20*time.Second {
			t.Errorf("gave up after %s, want exactly max_elapsed: the last wait is cut to the deadline", took)
		}
		// Waits of at most 1, 2, 4, 4, 4, ... s (at least half each):
		// between 6 and 11 failures fit in 20 s.
		if n := b.Attempts(); n < 6 || n > 12 {
			t.Errorf("%d attempts in 20 s", n)
		}
		if len(reports) != b.Attempts()-1 {
			t.Errorf("%d reports for %d attempts: the one that gives up is not a retry", len(reports), b.Attempts())
		}
		b.Succeed()
		b.Succeed()
		if got := reports[len(reports)-1]; got != 0 || b.Attempts() != 0 {
			t.Errorf("after Succeed: last report %d, attempts %d", got, b.Attempts())
		}
		if zeros := len(reports) - countNonZero(reports); zeros != 1 {
			t.Errorf("%d recovery reports, want one", zeros)
		}
	})
}

func countNonZero(v []int) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

// With MaxElapsed 0, Backoff never gives up; a cancelled context ends
// the wait.
func TestBackoffForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Backoff // the default policy: 100 ms up to 30 s, forever
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		var err error
		for err == nil {
			err = b.Fail(ctx, errDown)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Fail = %v, want the context's end after an hour of retries", err)
		}
		if b.Attempts() < 120 {
			t.Errorf("%d attempts in an hour; at most 30 s apart, want over 120", b.Attempts())
		}
	})
}
