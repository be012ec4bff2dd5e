package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyArtifacts writes the committed artifacts into a fresh root.
func copyArtifacts(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	artifacts := generate()
	for _, a := range artifacts {
		b, err := os.ReadFile(filepath.Join("..", "..", a.path))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, a.path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheckPassesOnCommittedArtifacts(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-root", copyArtifacts(t), "-check"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("-check exit %d, want 0: %s", code, stderr.String())
	}
}

// TestCheckFailsOnOneByteDriftD1 alters each artifact by one byte in three
// ways (flip, append, truncate) and expects -check to fail naming it.
func TestCheckFailsOnOneByteDriftD1(t *testing.T) {
	artifacts := generate()
	edits := map[string]func([]byte) []byte{
		"flip":     func(b []byte) []byte { b = bytes.Clone(b); b[len(b)/2] ^= 0x01; return b },
		"append":   func(b []byte) []byte { return append(bytes.Clone(b), '\n') },
		"truncate": func(b []byte) []byte { return b[:len(b)-1] },
	}
	for _, a := range artifacts {
		for name, edit := range edits {
			t.Run(a.path+"/"+name, func(t *testing.T) {
				root := copyArtifacts(t)
				path := filepath.Join(root, a.path)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, edit(b), 0o644); err != nil {
					t.Fatal(err)
				}
				var stderr bytes.Buffer
				code := run([]string{"-root", root, "-check"}, &bytes.Buffer{}, &stderr)
				if code != 1 {
					t.Fatalf("-check exit %d after a one-byte %s of %s, want 1", code, name, a.path)
				}
				if !strings.Contains(stderr.String(), a.path) {
					t.Errorf("-check output %q does not name %s", stderr.String(), a.path)
				}
			})
		}
	}
}

func TestCheckFailsOnMissingArtifact(t *testing.T) {
	root := copyArtifacts(t)
	if err := os.Remove(filepath.Join(root, indexArtifact)); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"-root", root, "-check"}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), indexArtifact) {
		t.Fatalf("exit %d, stderr %q; want 1 naming %s", code, stderr.String(), indexArtifact)
	}
}

func TestStdoutPrintsTheFrozenSchema(t *testing.T) {
	var stdout bytes.Buffer
	if code := run([]string{"-stdout"}, &stdout, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	sum := sha256.Sum256(stdout.Bytes())
	if got := hex.EncodeToString(sum[:]); got != "22338e662c66a0cb0f6055263afc18e122640e71f552b601251a1c7899593be3" {
		t.Fatalf("sha256 of -stdout = %s", got)
	}
}

func TestGenerateWritesEveryArtifact(t *testing.T) {
	root := t.TempDir()
	if code := run([]string{"-root", root}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if code := run([]string{"-root", root, "-check"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("-check after generating into %s: exit %d", root, code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-check", "-stdout"}, {"extra"}, {"-nope"}} {
		if code := run(args, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("run(%q) exit %d, want 2", args, code)
		}
	}
}

// TestGeneratedArtifactsAreDeterministicD1: two generations give the same
// bytes (that they are the committed files is TestCheckPassesOnCommittedArtifacts).
func TestGeneratedArtifactsAreDeterministicD1(t *testing.T) {
	first := generate()
	second := generate()
	if len(first) != 3 || len(second) != len(first) {
		t.Fatalf("got %d and %d artifacts, want 3 each", len(first), len(second))
	}
	for i, a := range first {
		if a.path != second[i].path || !bytes.Equal(a.bytes, second[i].bytes) {
			t.Errorf("artifact %d (%s) differs between two generations", i, a.path)
		}
	}
}
