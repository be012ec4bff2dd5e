package extension

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// writePlugin creates a plugin directory holding manifest and returns it.
func writePlugin(t *testing.T, dir, manifest string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runtimeManifest is a v1 manifest named name whose runtime runs command.
func runtimeManifest(name, command string) string {
	return `{"apiVersion":"reasonix.io/plugin/v1","name":"` + name + `","version":"0.1.0","runtime":{"command":` + jsonString(command) + `}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func entryNames(p []PackageEntry) []string {
	var names []string
	for _, e := range p {
		names = append(names, e.Name)
	}
	return names
}

func TestPackagesD8InstallEnableDisableRemoveRoundTrip(t *testing.T) {
	home := t.TempDir()
	src := writePlugin(t, filepath.Join(t.TempDir(), "acme-src"), runtimeManifest("acme", "${REASONIX_PLUGIN_ROOT}/bin/acme"))

	e, err := Install(home, src, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := PackageEntry{Name: "acme", Root: "plugins/acme", Version: "0.1.0", Enabled: true, Source: src}
	if !reflect.DeepEqual(*e, want) {
		t.Fatalf("Install = %+v, want %+v", *e, want)
	}
	load := func() []PackageEntry {
		t.Helper()
		p, err := LoadPackages(home)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := load(); !reflect.DeepEqual(got, []PackageEntry{want}) {
		t.Fatalf("after install: %+v, want %+v", got, want)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins", "acme", ManifestFile)); err != nil {
		t.Fatalf("installed copy: %v", err)
	}

	if err := SetEnabled(home, "acme", false); err != nil {
		t.Fatal(err)
	}
	if findEntry(load(), "acme").Enabled {
		t.Fatalf("after Disable: Enabled = true, want false")
	}
	if err := SetEnabled(home, "acme", true); err != nil {
		t.Fatal(err)
	}
	if !findEntry(load(), "acme").Enabled {
		t.Fatalf("after Enable: Enabled = false, want true")
	}
	if err := Remove(home, "acme"); err != nil {
		t.Fatal(err)
	}
	if got := load(); len(got) != 0 {
		t.Fatalf("after Remove: %+v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins", "acme")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("installed copy after Remove: stat err = %v, want not exist", err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("source after Remove: %v", err)
	}
}

func TestPackagesD8OperationsOnUnknownPlugin(t *testing.T) {
	home := t.TempDir()
	ops := []struct {
		op string
		fn func(home, name string) error
	}{
		{"enable", func(home, name string) error { return SetEnabled(home, name, true) }},
		{"disable", func(home, name string) error { return SetEnabled(home, name, false) }},
		{"remove", Remove},
	}
	for _, tt := range ops {
		t.Run(tt.op, func(t *testing.T) {
			err := tt.fn(home, "ghost")
			var pe *PluginError
			if !errors.As(err, &pe) || !errors.Is(err, errNotInstalled) || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("err = %v, want *PluginError wrapping errNotInstalled, which matches fs.ErrNotExist", err)
			}
			if pe.Plugin != "ghost" || pe.Op != tt.op {
				t.Errorf("PluginError = {%q, %q}, want {%q, %q}", pe.Plugin, pe.Op, "ghost", tt.op)
			}
			if !strings.Contains(err.Error(), `"ghost"`) {
				t.Errorf("Error() = %q, want it to name the plugin", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(home, packagesFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed operation wrote %s (stat err %v)", packagesFile, err)
	}
}

func TestPackagesSaveIsAtomicAndLeavesNoTempFiles(t *testing.T) {
	home := t.TempDir()
	base := t.TempDir()
	for _, name := range []string{"one", "two", "three"} {
		src := writePlugin(t, filepath.Join(base, name), runtimeManifest(name, "/opt/"+name))
		if _, err := Install(home, src, InstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := SetEnabled(home, "two", false); err != nil {
		t.Fatal(err)
	}
	if err := Remove(home, "three"); err != nil {
		t.Fatal(err)
	}
	var leftovers []string
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			leftovers = append(leftovers, path)
		}
		return err
	})
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %q", leftovers)
	}
	data, err := os.ReadFile(filepath.Join(home, packagesFile))
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's shape and member order (D8, PROTOCOL.md §3.2).
	want := `{
  "version": 1,
  "plugins": [
    {
      "name": "one",
      "source": ` + jsonString(filepath.Join(base, "one")) + `,
      "root": "plugins/one",
      "version": "0.1.0",
      "enabled": true
    },
    {
      "name": "two",
      "source": ` + jsonString(filepath.Join(base, "two")) + `,
      "root": "plugins/two",
      "version": "0.1.0",
      "enabled": false
    }
  ]
}
`
	if string(data) != want {
		t.Errorf("file =\n%s\nwant\n%s", data, want)
	}
}

func TestPackagesSaveEmptyAndReload(t *testing.T) {
	home := filepath.Join(t.TempDir(), "not", "yet")
	if err := savePackages(home, &packagesDoc{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(home, packagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"version\": 1,\n  \"plugins\": []\n}\n"; string(data) != want {
		t.Errorf("file = %q, want %q", data, want)
	}
	p, err := LoadPackages(home)
	if err != nil || len(p) != 0 {
		t.Errorf("LoadPackages = %+v, %v; want empty, nil", p, err)
	}
}

func TestPackagesSaveRefusesInvalidRecord(t *testing.T) {
	home := t.TempDir()
	p := []PackageEntry{{Name: "a", Root: "r", Enabled: true}, {Name: "a", Root: "r"}}
	err := savePackages(home, &packagesDoc{Plugins: p})
	if !errors.Is(err, errCorruptPackages) {
		t.Fatalf("Save with a repeated name: err = %v, want errCorruptPackages", err)
	}
	if _, err := os.Stat(filepath.Join(home, packagesFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an invalid record was written (stat err %v)", err)
	}
}

func TestLoadPackagesMissingFileIsEmpty(t *testing.T) {
	p, err := LoadPackages(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 0 {
		t.Errorf("Entries = %+v, want none", p)
	}
}

func TestLoadPackagesD3CorruptFileIsTypedError(t *testing.T) {
	entry := `{"name":"a","root":"plugins/a","enabled":true}`
	tests := []struct {
		name, doc, field, msg string
	}{
		{"empty file", ``, "", "one JSON object"},
		{"garbage", `not json`, "", "one JSON object"},
		{"truncated", `{"version":1,"plugins":[` + entry, "", "not valid JSON"},
		{"a line and column for a syntax error, counted in characters", "{\"version\":1,\n\"plugins\":[\"é\",]}", "", "(line 2, column 16)"},
		{"trailing data", `{"version":1,"plugins":[]}]`, "", "trailing data"},
		{"case-variant root member", `{"Version":1,"plugins":[]}`, "Version", `did you mean "version"?`},
		{"case-variant plugins", `{"version":1,"Plugins":[]}`, "Plugins", `did you mean "plugins"?`},
		{"duplicate root member", `{"version":1,"version":1,"plugins":[]}`, "version", "duplicate member"},
		{"duplicate unknown root member", `{"version":1,"plugins":[],"x":1,"x":2}`, "x", "duplicate member"},
		{"version 2", `{"version":2,"plugins":[]}`, "version", "unsupported version 2"},
		{"plugins object", `{"version":1,"plugins":{}}`, "plugins", "must be an array"},
		{"entry case variant", `{"version":1,"plugins":[{"name":"a","root":"r","Enabled":true}]}`, "plugins[0].enabled", "missing"},
		{"entry duplicate", `{"version":1,"plugins":[{"name":"a","root":"r","enabled":false,"enabled":true}]}`, "plugins[0].enabled", "duplicate member"},
		{"entry enabled string", `{"version":1,"plugins":[{"name":"a","root":"r","enabled":"true"}]}`, "plugins[0].enabled", "must be true or false"},
		{"entry without enabled", `{"version":1,"plugins":[{"name":"a","root":"r"}]}`, "plugins[0].enabled", "missing"},
		{"entry without root", `{"version":1,"plugins":[{"name":"a","enabled":true}]}`, "plugins[0].root", "missing"},
		{"entry without name", `{"version":1,"plugins":[{"root":"r","enabled":true}]}`, "plugins[0].name", "missing"},
		{"entry bad name", `{"version":1,"plugins":[{"name":"../x","root":"r","enabled":true}]}`, "plugins[0].name", "not a valid plugin name"},
		{"repeated name", `{"version":1,"plugins":[` + entry + `,` + entry + `]}`, "plugins[1].name", "installed twice"},
		// A later format is named as such, not as an entry this host does
		// not know, whatever the member order.
		{"version 2 with future entries", `{"plugins":[{"name":"a","root":"r","enabled":"yes"}],"version":2}`, "version", "unsupported version 2"},
		{"version 2 with a future entry shape", `{"version":2,"plugins":{"a":{"root":"r"}}}`, "version", "unsupported version 2"},
		// D8: the record's shown fields are plain text.
		{"root with ESC", `{"version":1,"plugins":[{"name":"a","root":"plugins/a\u001b[8m","enabled":true}]}`, "plugins[0].root", "control character"},
		{"version with newline", `{"version":1,"plugins":[{"name":"a","root":"r","enabled":true,"version":"1\n  intercepts: none"}]}`, "plugins[0].version", "control character"},
		{"source with C1", `{"version":1,"plugins":[{"name":"a","root":"r","enabled":true,"source":"/s\u009b"}]}`, "plugins[0].source", "control character"},
		{"description with ESC", `{"version":1,"plugins":[{"name":"a","root":"r","enabled":true,"description":"\u001b[2J"}]}`, "plugins[0].description", "control character"},
		// This project's earlier shape is read as strictly as before.
		{"earlier entry unknown member", `{"version":1,"packages":[{"name":"a","root":"r","enabled":true,"trusted":true}]}`, "packages[0].trusted", "unknown field"},
		{"earlier entry case variant", `{"version":1,"packages":[{"name":"a","root":"r","Enabled":true}]}`, "packages[0].Enabled", `did you mean "enabled"?`},
		{"earlier entry bad scope", `{"version":1,"packages":[{"name":"a","root":"r","enabled":true,"scope":"global"}]}`, "packages[0].scope", "not a scope"},
		{"earlier entry bad name", `{"version":1,"packages":[{"name":"../x","root":"r","enabled":true}]}`, "packages[0].name", "not a valid plugin name"},
		{"earlier entry repeating a plugin", `{"version":1,"plugins":[` + entry + `],"packages":[` + entry + `]}`, "packages[0].name", "installed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, packagesFile)
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := LoadPackages(home)
			if p != nil {
				t.Errorf("got %+v, want nil", p)
			}
			var pe *ManifestError
			if !errors.As(err, &pe) || !errors.Is(err, errCorruptPackages) {
				t.Fatalf("err = %v, want *ManifestError wrapping errCorruptPackages", err)
			}
			if pe.Path != path || pe.Field != tt.field || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("got {Path %q, Field %q, Msg %q}, want {%q, %q, containing %q}", pe.Path, pe.Field, pe.Msg, path, tt.field, tt.msg)
			}
			// D8: a corrupt record is never read as "nothing installed".
			if _, err := Install(home, writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/x")), InstallOptions{}); !errors.Is(err, errCorruptPackages) {
				t.Errorf("Install over a corrupt record: err = %v, want errCorruptPackages", err)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.doc {
				t.Errorf("the corrupt record was overwritten")
			}
		})
	}
}

func TestPackagesD10RecordSortedByName(t *testing.T) {
	home := t.TempDir()
	base := t.TempDir()
	for _, name := range []string{"charlie", "alpha", "bravo"} {
		src := writePlugin(t, filepath.Join(base, name), runtimeManifest(name, "/opt/"+name))
		if _, err := Install(home, src, InstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Reinstalling keeps the order: by name, as upstream keeps it (D8).
	if _, err := Install(home, filepath.Join(base, "alpha"), InstallOptions{Version: "2"}); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryNames(p), []string{"alpha", "bravo", "charlie"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %q, want %q", got, want)
	}
	if v := findEntry(p, "alpha").Version; v != "2" {
		t.Errorf("reinstalled version = %q, want %q", v, "2")
	}
}

func TestInstallReplacesExistingNameAndReenables(t *testing.T) {
	home := t.TempDir()
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
	if err := os.WriteFile(filepath.Join(src, "old.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := SetEnabled(home, "p", false); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "old.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(home, "plugins", "p")
	if _, err := os.Stat(filepath.Join(dst, "old.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old.txt survived the reinstall (stat err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "new.txt")); err != nil {
		t.Errorf("new.txt: %v", err)
	}
	p, err := LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	if !findEntry(p, "p").Enabled {
		t.Errorf("reinstall left the package disabled; installing is the consent")
	}
}

func TestInstallCopiesModesAndSafeSymlinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Log("permission bits and symlinks are not portable to Windows; checking the copy only")
	}
	home := t.TempDir()
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "${REASONIX_PLUGIN_ROOT}/bin/p"))
	if err := os.MkdirAll(filepath.Join(src, "bin", "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "p"), []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "lib", "data"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	symlinks := runtime.GOOS != "windows" && os.Symlink(filepath.Join("lib", "data"), filepath.Join(src, "bin", "link")) == nil
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(home, "plugins", "p")
	data, err := os.ReadFile(filepath.Join(dst, "bin", "lib", "data"))
	if err != nil || string(data) != "data" {
		t.Fatalf("copied file = %q, %v; want %q", data, err, "data")
	}
	if runtime.GOOS == "windows" {
		return
	}
	for path, want := range map[string]fs.FileMode{"bin/p": 0o755, "bin/lib/data": 0o600} {
		fi, err := os.Stat(filepath.Join(dst, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", path, got, want)
		}
	}
	if symlinks {
		link, err := os.Readlink(filepath.Join(dst, "bin", "link"))
		if err != nil || link != filepath.Join("lib", "data") {
			t.Errorf("copied symlink = %q, %v; want %q", link, err, filepath.Join("lib", "data"))
		}
	}
}

func TestInstallRejectsEscapingSymlinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Log("creating symlinks needs privileges on Windows; the rule is the same")
		return
	}
	tests := []struct{ name, target string }{
		{"absolute", "/etc/passwd"},
		{"parent", "../../outside"},
		{"sneaky", "sub/../../outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
			if err := os.Symlink(tt.target, filepath.Join(src, "link")); err != nil {
				t.Fatal(err)
			}
			_, err := Install(home, src, InstallOptions{})
			wantUnsafeInstall(t, home, err)
		})
	}
}

func TestInstallRejectsInvalidNames(t *testing.T) {
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/opt/p"))
	for _, name := range []string{"..", ".hidden", "a/b", `a\b`, "has space", "a:b", strings.Repeat("x", 129), "-dash"} {
		t.Run(name, func(t *testing.T) {
			_, err := Install(t.TempDir(), src, InstallOptions{Name: name})
			if !errors.Is(err, errInvalidPluginName) {
				t.Errorf("err = %v, want errInvalidPluginName", err)
			}
		})
	}
	for _, name := range []string{"a", "A1", "my_plugin.v2", "x-y", strings.Repeat("x", 128)} {
		if !validPluginName(name) {
			t.Errorf("validPluginName(%q) = false, want true", name)
		}
	}
}

func TestInstallRejectsBadManifestAndScope(t *testing.T) {
	home := t.TempDir()
	bad := writePlugin(t, filepath.Join(t.TempDir(), "bad"), `{"apiVersion":"reasonix.io/plugin/v1","name":"bad","runtime":{"command":"/x","priority":5000}}`)
	_, err := Install(home, bad, InstallOptions{})
	var me *ManifestError
	if !errors.As(err, &me) || me.Field != "runtime.priority" {
		t.Errorf("bad manifest: err = %v, want *ManifestError for runtime.priority", err)
	}
	// Scopes are gone from the record (D8); the earlier record's are
	// still judged when it is migrated.
	good := writePlugin(t, filepath.Join(t.TempDir(), "good"), runtimeManifest("good", "/x"))
	record := `{"version":1,"packages":[{"name":"good","root":` + strconv.Quote(good) + `,"enabled":true,"scope":"global"}]}`
	if err := os.WriteFile(filepath.Join(home, packagesFile), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(home, good, InstallOptions{}); err == nil || !strings.Contains(err.Error(), `"global" is not a scope`) {
		t.Errorf("bad scope: err = %v, want a scope error", err)
	}
}

func TestInstallRefusesHomeInsidePluginDir(t *testing.T) {
	src := writePlugin(t, filepath.Join(t.TempDir(), "p"), runtimeManifest("p", "/x"))
	_, err := Install(filepath.Join(src, "home"), src, InstallOptions{})
	if err == nil || !strings.Contains(err.Error(), "inside the plugin directory") {
		t.Fatalf("err = %v, want a refusal to copy a directory into itself", err)
	}
}

func TestInstallLinkAndRemoveKeepsDirectory(t *testing.T) {
	home := t.TempDir()
	src := writePlugin(t, filepath.Join(t.TempDir(), "linked"), runtimeManifest("linked", "/x"))
	e, err := Install(home, src, InstallOptions{Link: true, Name: "other-name"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Linked || e.Root != src || e.Name != "other-name" {
		t.Errorf("entry = %+v, want linked at %s as other-name", e, src)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a linked install copied files (stat err %v)", err)
	}
	if got := e.rootPath(home); got != src {
		t.Errorf("RootPath = %q, want %q", got, src)
	}
	if err := Remove(home, "other-name"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, ManifestFile)); err != nil {
		t.Errorf("Remove deleted the linked directory: %v", err)
	}
}

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

// wantUnsafeInstall checks that Install refused with errUnsafeFile and
// left neither a copy nor a record behind.
func wantUnsafeInstall(t *testing.T, home string, err error) {
	t.Helper()
	var pe *PluginError
	if !errors.As(err, &pe) || !errors.Is(err, errUnsafeFile) {
		t.Fatalf("err = %v, want *PluginError wrapping errUnsafeFile", err)
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
	if err := copyFile(sr, dr, "a", info); !errors.Is(err, errUnsafeFile) {
		t.Errorf("err = %v, want errUnsafeFile", err)
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

// upstreamRecord is plugin-packages.json read with exactly upstream's
// member set, as upstream reads it: encoding/json, unknown members
// ignored (PROTOCOL.md §3.2).
type upstreamRecord struct {
	Version int `json:"version"`
	Plugins []struct {
		Name         string `json:"name"`
		Source       string `json:"source"`
		Root         string `json:"root"`
		Version      string `json:"version"`
		Description  string `json:"description"`
		ManifestKind string `json:"manifestKind"`
		Enabled      bool   `json:"enabled"`
		Commit       string `json:"commit"`
	} `json:"plugins"`
}

// readUpstream reads home's record as upstream would and returns its
// entries' names and the record.
func readUpstream(t *testing.T, home string) ([]string, upstreamRecord, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(home, packagesFile))
	if err != nil {
		t.Fatal(err)
	}
	var r upstreamRecord
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("upstream cannot read what we wrote: %v\n%s", err, data)
	}
	var names []string
	for _, p := range r.Plugins {
		names = append(names, p.Name)
	}
	return names, r, data
}

func TestPackagesD8UpstreamRecordReadAndRewrittenInItsShape(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "records", "upstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, packagesFile), fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	want := []PackageEntry{
		{Name: "code-review", Source: "https://github.com/example/code-review", Root: "plugins/code-review", Version: "1.4.0",
			Description: "Reviews diffs before they are committed.", ManifestKind: "reasonix", Enabled: true, Commit: "3f2a9c1d0b7e6a5f4e3d2c1b0a9f8e7d6c5b4a39"},
		{Name: "dev-tools", Root: "/opt/reasonix-plugins/dev-tools", Linked: true},
		{Name: "linter", Source: "/home/user/src/linter", Root: "plugins/linter", Version: "0.2.0", Enabled: true,
			Unknown: map[string]json.RawMessage{"pinned": json.RawMessage(`{
        "channel": "beta"
      }`)}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("LoadPackages =\n%+v\nwant\n%+v", p, want)
	}

	// A change that changes nothing rewrites the file byte for byte.
	if err := SetEnabled(home, "code-review", true); err != nil {
		t.Fatal(err)
	}
	if _, _, data := readUpstream(t, home); string(data) != string(fixture) {
		t.Fatalf("rewritten =\n%s\nwant the fixture unchanged", data)
	}

	src := writePlugin(t, filepath.Join(t.TempDir(), "alpha"), runtimeManifest("alpha", "/opt/alpha"))
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := SetEnabled(home, "dev-tools", true); err != nil {
		t.Fatal(err)
	}
	names, r, data := readUpstream(t, home)
	if got := strings.Join(names, ","); got != "alpha,code-review,dev-tools,linter" || r.Version != 1 {
		t.Fatalf("upstream reads version %d, plugins %s; want 1, alpha,code-review,dev-tools,linter:\n%s", r.Version, got, data)
	}
	if a := r.Plugins[0]; a.Root != "plugins/alpha" || a.Source != src || !a.Enabled || a.Version != "0.1.0" {
		t.Errorf("upstream reads the installed entry as %+v", a)
	}
	if !r.Plugins[2].Enabled {
		t.Errorf("dev-tools is still disabled for upstream after SetEnabled")
	}
	for _, kept := range []string{`"pinned": {`, `"channel": "beta"`, `"updatedAt": "2026-11-30T10:00:00Z"`, `"commit": "3f2a9c1d0b7e6a5f4e3d2c1b0a9f8e7d6c5b4a39"`} {
		if !strings.Contains(string(data), kept) {
			t.Errorf("the rewrite lost %s:\n%s", kept, data)
		}
	}

	if err := Remove(home, "code-review"); err != nil {
		t.Fatal(err)
	}
	names, _, data = readUpstream(t, home)
	if got := strings.Join(names, ","); got != "alpha,dev-tools,linter" || !strings.Contains(string(data), `"updatedAt"`) || !strings.Contains(string(data), `"pinned"`) {
		t.Errorf("after Remove upstream reads %s:\n%s", got, data)
	}
}

func TestPackagesD8EarlierRecordMigratedOnFirstWrite(t *testing.T) {
	earlier, err := os.ReadFile(filepath.Join("testdata", "records", "earlier.json"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, packagesFile), earlier, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	if got := entryNames(p); !reflect.DeepEqual(got, []string{"local", "zeta"}) {
		t.Fatalf("entries %q, want local, zeta (by name)", got)
	}
	local, zeta := p[0], p[1]
	// D8: project configuration never launches; the entry says why it is off.
	if local.Enabled || !local.Linked || !strings.Contains(local.Notice, "project level") {
		t.Errorf("project entry = %+v, want disabled, linked, with a notice naming the project level", local)
	}
	if !zeta.Enabled || zeta.Linked || zeta.Root != "plugins/zeta" || zeta.Source != "/home/user/src/zeta" || zeta.Version != "0.1.0" || !strings.Contains(zeta.Notice, "earlier shape") {
		t.Errorf("user entry = %+v, want it kept as it was, with a migration notice", zeta)
	}
	// Reading alone never rewrites the file.
	if data, _ := os.ReadFile(filepath.Join(home, packagesFile)); string(data) != string(earlier) {
		t.Fatalf("LoadPackages rewrote the record")
	}
	if err := SetEnabled(home, "zeta", true); err != nil {
		t.Fatal(err)
	}
	names, r, data := readUpstream(t, home)
	if strings.Join(names, ",") != "local,zeta" || strings.Contains(string(data), `"packages"`) || strings.Contains(string(data), `"scope"`) {
		t.Fatalf("after the first write upstream reads %q:\n%s", names, data)
	}
	if r.Plugins[0].Enabled || r.Plugins[0].Root != "/work/project/.reasonix/plugins/local" || r.Plugins[1].Source != "/home/user/src/zeta" {
		t.Errorf("migrated entries = %+v", r.Plugins)
	}
	if p, err := LoadPackages(home); err != nil || p[1].Notice != "" {
		t.Errorf("after migration: %+v, %v; want no notice left", p, err)
	}
}
