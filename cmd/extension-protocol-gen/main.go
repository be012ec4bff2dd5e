// Command extension-protocol-gen writes the generated artifacts of the
// protocol from the Go DTOs and the registry of package extension: the
// canonical schema (schema.generated.json), the Go file holding its hash,
// and the Markdown index.
//
// Usage:
//
//	extension-protocol-gen [-root DIR] [-check | -stdout]
//
// With -check it writes nothing and exits 1, naming each file, when a
// committed artifact differs from a fresh generation by even one byte. With
// -stdout it prints the canonical schema only.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/reasonix-ext/extension"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole command; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("extension-protocol-gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "module root the artifact paths are relative to")
	check := fs.Bool("check", false, "compare the committed artifacts with a fresh generation; exit 1 on any drift")
	toStdout := fs.Bool("stdout", false, "print the canonical schema only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || (*check && *toStdout) {
		fmt.Fprintln(stderr, "usage: extension-protocol-gen [-root DIR] [-check | -stdout]")
		return 2
	}
	if *toStdout {
		if _, err := stdout.Write(extension.CanonicalSchema()); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	artifacts, err := generate()
	if err != nil {
		fmt.Fprintln(stderr, "extension-protocol-gen:", err)
		return 1
	}
	status := 0
	for _, a := range artifacts {
		path := filepath.Join(*root, filepath.FromSlash(a.path))
		if *check {
			got, err := os.ReadFile(path)
			switch {
			case err != nil:
				fmt.Fprintf(stderr, "extension-protocol-gen: %s: %v\n", a.path, err)
				status = 1
			case !bytes.Equal(got, a.bytes):
				fmt.Fprintf(stderr, "extension-protocol-gen: %s is stale: regenerate with go generate\n", a.path)
				status = 1
			}
			continue
		}
		if err := os.WriteFile(path, a.bytes, 0o644); err != nil {
			fmt.Fprintln(stderr, "extension-protocol-gen:", err)
			return 1
		}
	}
	return status
}
