package tide_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tide-cdc/tide"
)

func TestBuildFencedRefusesALocalStore(t *testing.T) {
	yaml := "name: local\nsource: {generate: {count: 1}}\nsink: {stdout: {}}\ndata_dir: " + t.TempDir() + "\n"
	spec, err := tide.Parse([]byte(yaml), tide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = spec.BuildFenced(context.Background(), "w1@7")
	if err == nil || !strings.Contains(err.Error(), `pipeline "local" cannot be fenced for owner "w1@7": only a checkpoint in NATS KV can`) {
		t.Fatalf("got %v, want a refusal naming the pipeline and the owner", err)
	}
}
