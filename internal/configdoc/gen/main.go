// Command gen writes comments_gen.go: the doc comments of the Config
// types, which the configuration reference shows. Run it through
// go generate ./internal/configdoc, from that directory.
package main

import (
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"

	"github.com/tide-cdc/tide/internal/configdoc"
)

func main() {
	out := flag.String("o", "comments_gen.go", "the file to write")
	root := flag.String("root", "../..", "the module's root directory")
	flag.Parse()
	if err := run(*root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root, out string) error {
	comments, err := configdoc.Scan(filepath.Clean(root))
	if err != nil {
		return err
	}
	src, err := format.Source(configdoc.Source(comments))
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
