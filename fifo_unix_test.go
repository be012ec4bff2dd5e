//go:build unix

package extension_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/reasonix-ext/extension"
)

// TestAFIFOInPlaceOfAManifestOrTheRecordIsRefusedNotWaitedOn: a named pipe
// where the manifest or plugin-packages.json should be would block an open
// until something writes to it; it is refused as not a regular file, at
// once, by every reader of those files.
func TestAFIFOInPlaceOfAManifestOrTheRecordIsRefusedNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, extension.ManifestFile), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	if _, err := extension.TrustPlugin(dir, "p"); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("TrustPlugin: %v; want the manifest refused as not a regular file", err)
	}
	if _, err := extension.Install(t.TempDir(), dir, extension.InstallOptions{}); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("Install: %v; want the manifest refused as not a regular file", err)
	}
	home := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(home, "plugin-packages.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := extension.LoadPackages(home); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("LoadPackages: %v; want the record refused as not a regular file", err)
	}
	if _, err := os.Stat(home); err != nil {
		t.Fatal(err)
	}
}
