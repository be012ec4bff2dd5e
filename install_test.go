package extension

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// symlinkOrReturn creates a symlink, reporting false (after a log line)
// where the platform does not allow it, so a test can end early.
func symlinkOrReturn(t *testing.T, target, link string) bool {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Logf("no symlinks here (%v); the rule is the same", err)
		return false
	}
	return true
}

// wantUnsafeInstall checks that Install refused with ErrUnsafeFile and
// left neither a copy nor a record behind.
func wantUnsafeInstall(t *testing.T, home string, err error) {
	t.Helper()
	var pe *PluginError
	if !errors.As(err, &pe) || !errors.Is(err, ErrUnsafeFile) {
		t.Fatalf("err = %v, want *PluginError wrapping ErrUnsafeFile", err)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins", "p")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused install left a copy (stat err %v)", err)
	}
	if p, err := LoadPackages(home); err != nil || len(p) != 0 {
		t.Errorf("a refused install was recorded: %+v, %v", p, err)
	}
}

func TestInstallD8RefusesSymlinkChainEscape(t *testing.T) {
	// The reviewer's reproducer: each link's text stays inside the plugin
	// directory, but d/e/f is itself an upward link, so the chain leads to
	// the user's key three levels above it.
	base := t.TempDir()
	key := filepath.Join(base, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := writePlugin(t, filepath.Join(base, "a", "b", "p"), runtimeManifest("p", "/opt/p"))
	if !symlinkOrReturn(t, filepath.Join("..", ".."), filepath.Join(src, "d", "e", "f")) ||
		!symlinkOrReturn(t, "../d/e/f/../../../.ssh/id_ed25519", filepath.Join(src, "prompts", "readme.md")) {
		return
	}
	if data, err := os.ReadFile(filepath.Join(src, "prompts", "readme.md")); err != nil || string(data) != "PRIVATE KEY" {
		t.Fatalf("the fixture does not reach the key: %q, %v", data, err)
	}
	home := t.TempDir()
	_, err := Install(home, src, InstallOptions{})
	wantUnsafeInstall(t, home, err)
	if !strings.Contains(err.Error(), filepath.Join("prompts", "readme.md")) {
		t.Errorf("err = %v, want it to name the link", err)
	}
	if data, err := os.ReadFile(filepath.Join(home, "plugins", "p", "prompts", "readme.md")); err == nil {
		t.Errorf("the installed copy reads %q", data)
	}
}

func TestInstallD8KeepsLinkChainsThatStayInside(t *testing.T) {
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
	// d/e/f leads back to the plugin root, and readme.md goes through it
	// to the manifest: every step stays inside, so both are kept as links.
	if !symlinkOrReturn(t, filepath.Join("..", ".."), filepath.Join(src, "d", "e", "f")) ||
		!symlinkOrReturn(t, "../d/e/f/"+ManifestFile, filepath.Join(src, "prompts", "readme.md")) {
		return
	}
	home := t.TempDir()
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(home, "plugins", "p")
	got, err := os.ReadFile(filepath.Join(dst, "prompts", "readme.md"))
	want, _ := os.ReadFile(filepath.Join(src, ManifestFile))
	if err != nil || string(got) != string(want) {
		t.Errorf("copied chain reads %q, %v; want the copied manifest", got, err)
	}
	if link, err := os.Readlink(filepath.Join(dst, "d", "e", "f")); err != nil || link != filepath.Join("..", "..") {
		t.Errorf("copied directory link = %q, %v", link, err)
	}
}

func TestInstallD8RefusesDanglingAndTransientlyEscapingLinks(t *testing.T) {
	tests := []struct{ name, link, target string }{
		{"dangling", "dangling", "missing/file"},
		// The text stays inside and so does the end point, but the chain
		// steps out of the directory and back in by its name, which would
		// land somewhere else in the copy.
		{"out and back in", "back", "up/p/" + ManifestFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
			if !symlinkOrReturn(t, "..", filepath.Join(src, "up")) {
				return
			}
			if tt.name == "dangling" {
				os.Remove(filepath.Join(src, "up")) // "up" itself escapes; keep only the dangling link
			}
			if !symlinkOrReturn(t, tt.target, filepath.Join(src, tt.link)) {
				return
			}
			home := t.TempDir()
			_, err := Install(home, src, InstallOptions{})
			wantUnsafeInstall(t, home, err)
		})
	}
}

func TestInstallD8CopyFileRefusesFileSwappedForLink(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("plugin data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "other"), []byte("something else"), 0o644); err != nil {
		t.Fatal(err)
	}
	sr, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	dr, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	info, err := sr.Lstat("a")
	if err != nil {
		t.Fatal(err)
	}
	// Between the type check and the open, "a" becomes a link.
	if err := os.Remove(filepath.Join(src, "a")); err != nil {
		t.Fatal(err)
	}
	if !symlinkOrReturn(t, "other", filepath.Join(src, "a")) {
		return
	}
	if err := copyFile(sr, dr, "a", info); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("err = %v, want ErrUnsafeFile", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the swapped file was copied (stat err %v)", err)
	}
}

func TestInstallRefusesHomeReachedThroughSymlinkIntoSource(t *testing.T) {
	tests := []struct {
		name string
		home func(alias string) string
	}{
		{"home is the link", func(alias string) string { return alias }},
		{"home below the link, not yet created", func(alias string) string { return filepath.Join(alias, "home") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
			if err := os.MkdirAll(filepath.Join(src, "inner"), 0o755); err != nil {
				t.Fatal(err)
			}
			alias := filepath.Join(t.TempDir(), "alias")
			if !symlinkOrReturn(t, filepath.Join(src, "inner"), alias) {
				return
			}
			_, err := Install(tt.home(alias), src, InstallOptions{})
			if err == nil || !strings.Contains(err.Error(), "inside the plugin directory") {
				t.Fatalf("err = %v, want a refusal to copy a directory into itself", err)
			}
			entries, _ := os.ReadDir(filepath.Join(src, "inner"))
			for _, e := range entries {
				if sub, _ := os.ReadDir(filepath.Join(src, "inner", e.Name(), "plugins")); len(sub) != 0 {
					t.Errorf("the refused install left %v inside the plugin directory", sub)
				}
			}
		})
	}
}

func TestInstallCopyTreeSkipsItsOwnDestination(t *testing.T) {
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
	dst := filepath.Join(src, "nested", "copy")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, ManifestFile)); err != nil {
		t.Errorf("the manifest was not copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "nested", "copy")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy holds a copy of itself (stat err %v)", err)
	}
}

func TestInstallD8RefusesControlCharactersInTheRecord(t *testing.T) {
	home := t.TempDir()
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
	_, err := Install(home, src, InstallOptions{Version: "1.0\n  intercepts:     none"})
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(me.Msg, "control character") {
		t.Fatalf("err = %v, want a control character refusal", err)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused install copied files (stat err %v)", err)
	}
}
