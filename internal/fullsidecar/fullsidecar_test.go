package fullsidecar_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reasonix-ext/extension/internal/fullsidecar"
)

// TestManifestIsTheExamplesManifest: the embedded manifest, which exthost
// installs, is byte for byte the one beside the example program.
func TestManifestIsTheExamplesManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "sdk", "examples", "fullsidecar", "reasonix-plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != fullsidecar.Manifest {
		t.Errorf("internal/fullsidecar/reasonix-plugin.json differs from sdk/examples/fullsidecar/reasonix-plugin.json; copy the example's over it")
	}
}
