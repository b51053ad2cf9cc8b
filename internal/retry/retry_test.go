package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Sleep on a cancelled context took %s", took)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}

func TestJitterInUpperHalf(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 3, 100 * time.Millisecond, 5 * time.Second} {
		lowSeen, highSeen := false, false
		for range 2000 {
			j := Jitter(d)
			if j < d/2 || j > d {
				t.Fatalf("Jitter(%s) = %s, outside [%s, %s]", d, j, d/2, d)
			}
			lowSeen = lowSeen || j < d/2+(d-d/2)/4+1
			highSeen = highSeen || j > d-(d-d/2)/4-1
		}
		if !lowSeen || !highSeen {
			t.Errorf("Jitter(%s) did not spread over its range (low %v, high %v)", d, lowSeen, highSeen)
		}
	}
	if j := Jitter(0); j != 0 {
		t.Fatalf("Jitter(0) = %s", j)
	}
}
