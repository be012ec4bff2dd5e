package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readme returns the README's fenced blocks of lang under the heading
// section, in order.
func readme(t *testing.T, section, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(b), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", section)
	}
	text, _, _ = strings.Cut(text, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestReadmeCommandsAreWhatCIRuns: the README's two set-up commands, the
// main job and the tests, are each a line of .ci/run.
func TestReadmeCommandsAreWhatCIRuns(t *testing.T) {
	blocks := readme(t, "Two commands", "sh")
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ci), "\n")
	if len(blocks) != 2 {
		t.Fatalf("the README shows %d command blocks under Two commands, want 2", len(blocks))
	}
	for _, b := range blocks {
		cmd := strings.TrimSpace(b)
		found := false
		for _, l := range lines {
			found = found || strings.TrimSpace(l) == cmd
		}
		if !found {
			t.Errorf(".ci/run does not run the README's %q", cmd)
		}
	}
}

// TestReadmeFirstSidecarBlocksRm follows the README's "A first sidecar"
// literally: its program and manifest saved in no-rm, its shell steps run
// as written with CHECKOUT set to this checkout, and the demo turn they
// end with shows the step tool.before rm notes.txt blocked.
func TestReadmeFirstSidecarBlocksRm(t *testing.T) {
	program := readme(t, "A first sidecar", "go")
	manifest := readme(t, "A first sidecar", "json")
	steps := readme(t, "A first sidecar", "sh")
	if len(program) != 1 || len(manifest) != 1 || len(steps) != 1 {
		t.Fatalf("want one program, one manifest and one block of steps; got %d, %d, %d", len(program), len(manifest), len(steps))
	}
	work := t.TempDir()
	dir := filepath.Join(work, "no-rm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"main.go": program[0], "reasonix-plugin.json": manifest[0]} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-e", "-c", steps[0])
	sh.Dir = work
	// Offline: the module comes from the checkout, nothing from a proxy.
	sh.Env = append(os.Environ(), "CHECKOUT="+checkout, "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's steps failed: %v\n%s", err, out)
	}
	transcript := string(out)
	_, step, _ := strings.Cut(transcript, "── tool.before rm notes.txt\n")
	step, _, _ = strings.Cut(step, "── ")
	if !strings.Contains(step, "   blocked by no-rm: rm is not allowed here") {
		t.Fatalf("the demo turn did not block rm:\n%s", transcript)
	}
}
