package mql

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Past the stage limit, $sort and $group spill and answer what they
// answer in memory (for $group, in another order: mongod promises none).
func TestSpillMatchesMemory(t *testing.T) {
	var input []bson.Raw
	for i := range 2000 {
		input = append(input, doc(t, fmt.Sprintf(`{"_id": %d, "x": %d, "g": %d, "pad": "%s"}`, i, (i*7919)%1009, i%37, strings.Repeat("p", 200))))
	}
	small := Limits{StageBytes: 64 << 10, TempDir: t.TempDir()}
	tests := map[string]string{
		"sort":                    `[{"$sort": {"x": 1}}]`,
		"sort ties stay in order": `[{"$sort": {"g": -1}}]`,
		"sort then limit":         `[{"$sort": {"x": -1}}, {"$limit": 700}]`,
		"group":                   `[{"$group": {"_id": "$g", "n": {"$sum": 1}, "pads": {"$push": "$pad"}, "ids": {"$push": "$_id"}}}, {"$sort": {"_id": 1}}]`,
		"group of built input":    `[{"$addFields": {"y": "$pad"}}, {"$group": {"_id": {"$mod": ["$x", 5]}, "first": {"$first": "$_id"}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]`,
		"match then group":        `[{"$match": {"x": {"$gt": 100}}}, {"$match": {"g": {"$ne": 3}}}, {"$group": {"_id": "$_id", "d": {"$first": "$$ROOT"}}}, {"$sort": {"_id": 1}}]`,
		"group then sort":         `[{"$group": {"_id": "$_id", "d": {"$first": "$$ROOT"}}}, {"$sort": {"d.x": 1, "_id": 1}}, {"$project": {"_id": 1}}]`,
	}
	for name, pipeline := range tests {
		t.Run(name, func(t *testing.T) {
			var stages []bson.Raw
			for _, v := range arrayValues(val(t, pipeline).Value) {
				stages = append(stages, v.Document())
			}
			p, err := CompilePipeline(stages)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.Run(nil, input)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.RunLimited(nil, input, small)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("spilled result differs: got %d documents, want %d", len(got), len(want))
			}
			// The spill path was taken: without a directory to spill to,
			// the run fails.
			_, err = p.RunLimited(nil, input, Limits{StageBytes: small.StageBytes, TempDir: filepath.Join(small.TempDir, "none")})
			if err == nil || !strings.Contains(err.Error(), "spill to disk") {
				t.Errorf("without a spill directory: err = %v, want a spill error", err)
			}
			_, err = p.RunLimited(nil, input, Limits{StageBytes: small.StageBytes, NoDiskUse: true})
			wantCode(t, err, 292, "")
			left, _ := os.ReadDir(small.TempDir)
			if len(left) > 0 {
				t.Errorf("spill files left: %v", left)
			}
		})
	}
}

// A $lookup's matches for one document are bounded (4568), and so is
// what all of a run holds (the budget, 146), which it gives back.
func TestLookupAndBudgetLimits(t *testing.T) {
	var input []bson.Raw
	for i := range 100 {
		input = append(input, doc(t, fmt.Sprintf(`{"_id": %d, "pad": "%s"}`, i, strings.Repeat("p", 1000))))
	}
	env := sliceEnv{"c": input}
	p, err := CompilePipeline([]bson.Raw{doc(t, `{"$lookup": {"from": "c", "pipeline": [], "as": "all"}}`), doc(t, `{"$count": "n"}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.RunLimited(env, input, Limits{LookupBytes: 50 << 10})
	wantCode(t, err, 4568, "Total size of documents in c matching pipeline's $lookup stage exceeds 51200 bytes")

	b := NewBudget(200 << 10)
	out, err := p.RunLimited(env, input, Limits{Budget: b})
	if err != nil || len(out) != 1 {
		t.Fatalf("within the budget: %v, %v", out, err)
	}
	p2, _ := CompilePipeline([]bson.Raw{doc(t, `{"$lookup": {"from": "c", "pipeline": [], "as": "all"}}`)})
	_, err = p2.RunLimited(env, input, Limits{Budget: b})
	wantCode(t, err, 146, "")
	if b.InUse() != 0 {
		t.Errorf("budget in use after the runs: %d", b.InUse())
	}
}

type sliceEnv map[string][]bson.Raw

func (e sliceEnv) Collection(name string) ([]bson.Raw, error) { return e[name], nil }

// appendJoined builds what setField builds, in one buffer.
func TestAppendJoinedIsSetField(t *testing.T) {
	matched := docs(t, `{"_id": 1, "a": [1, 2]}`, `{}`, `{"_id": "x", "s": {"t": null}}`)
	for _, d := range docs(t, `{}`, `{"_id": 7}`, `{"_id": 7, "b": {"c": [1]}, "d": "e"}`) {
		for _, m := range [][]bson.Raw{nil, matched[:1], matched} {
			vals := make([]bson.RawValue, len(m))
			for i, x := range m {
				vals[i] = vDoc(x)
			}
			root := rawNode(vDoc(d))
			root.load()
			setField(root, []string{"as"}, vArray(vals))
			want := root.encodeDoc(nil)
			if got := appendJoined(d, "as", m); !bytes.Equal(got, want) {
				t.Errorf("appendJoined(%s, %d matches) = %s, want %s", d, len(m), bson.Raw(got), want)
			}
		}
	}
}

// One group past the limit cannot be spilled: 292, with disk use or not.
func TestOneGroupPastTheLimit(t *testing.T) {
	var input []bson.Raw
	for i := range 500 {
		input = append(input, doc(t, fmt.Sprintf(`{"_id": %d, "pad": "%s"}`, i, strings.Repeat("p", 300))))
	}
	p, err := CompilePipeline([]bson.Raw{doc(t, `{"$group": {"_id": null, "all": {"$push": "$$ROOT"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.RunLimited(nil, input, Limits{StageBytes: 64 << 10, TempDir: t.TempDir()})
	wantCode(t, err, 292, "one group of $group exceeded the memory limit of 65536 bytes; a single group cannot be spilled to disk")
}
