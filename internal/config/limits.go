package config

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"
)

// Limits on a pipeline file. A real one is a few kilobytes; the caps stop
// a mistaken or hostile file (-f /dev/zero, a "billion laughs" of nested
// aliases) from exhausting memory before validation can say what is wrong.
const (
	// MaxFileBytes is the largest pipeline file Load reads.
	MaxFileBytes = 4 << 20
	// MaxNodes is how many YAML values (scalars, lists, mappings) a
	// pipeline file may hold once every alias is expanded.
	MaxNodes = 200_000
)

// readPipelineFile reads a regular file of at most MaxFileBytes. It checks
// the type before opening: opening a FIFO would block.
func readPipelineFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline file: %w", err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline file: %w", err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil { // the file opened may not be the one checked
		return nil, fmt.Errorf("read pipeline file: %w", err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read pipeline file: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("pipeline file %s is larger than %d MiB, the most a pipeline file may hold", path, MaxFileBytes>>20)
	}
	return data, nil
}

func checkRegular(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		if fi.Size() > MaxFileBytes {
			return fmt.Errorf("pipeline file %s is %d bytes, larger than %d MiB, the most a pipeline file may hold", path, fi.Size(), MaxFileBytes>>20)
		}
		return nil
	}
	what := "not a regular file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	return fmt.Errorf("pipeline file %s is %s: give the path of a regular YAML file", path, what)
}

// checkExpansion refuses a document whose aliases expand it beyond
// MaxNodes values, naming the alias that crossed the limit. It counts
// each node once (an alias's size is remembered), so it is linear in the
// size of the file, however much the aliases would expand.
func checkExpansion(doc *yaml.Node) error {
	sizes := map[*yaml.Node]int{}
	var culprit *yaml.Node // the alias whose expansion first crossed MaxNodes
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if s, ok := sizes[n]; ok {
			return s
		}
		sizes[n] = MaxNodes + 1 // while in progress: a cycle counts as too large
		total := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			total = size(n.Alias)
		}
		for _, c := range n.Content {
			total += size(c)
			if total > MaxNodes {
				if culprit == nil && c.Kind == yaml.AliasNode {
					culprit = c
				}
				total = MaxNodes + 1 // saturate
				break
			}
		}
		sizes[n] = total
		return total
	}
	if size(doc) <= MaxNodes {
		return nil
	}
	if culprit != nil {
		return fmt.Errorf("line %d: alias *%s expands the file beyond %d values, far more than a pipeline needs "+
			"(nested aliases that multiply, a \"billion laughs\"); refusing it", culprit.Line, culprit.Value, MaxNodes)
	}
	return fmt.Errorf("the file holds more than %d values, far more than a pipeline needs; refusing it", MaxNodes)
}
