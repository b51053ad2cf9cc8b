package tide_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tide-cdc/tide"
)

func TestFenceCheckpointRefusesALocalStore(t *testing.T) {
	yaml := "name: local\nsource: {generate: {count: 1}}\nsink: {stdout: {}}\ndata_dir: " + t.TempDir() + "\n"
	err := tide.FenceCheckpoint(context.Background(), []byte(yaml), tide.Options{}, "w1@7")
	if err == nil || !strings.Contains(err.Error(), `pipeline "local" cannot be fenced for owner "w1@7": only a checkpoint in NATS KV can`) {
		t.Fatalf("got %v, want a refusal naming the pipeline and the owner", err)
	}
}
