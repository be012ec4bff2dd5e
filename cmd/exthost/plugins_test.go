package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
)

// sidecarManifest is a valid v1 manifest whose runtime runs bin/x of the
// plugin directory.
func sidecarManifest(name, version string) string {
	return `{"apiVersion":"reasonix.io/plugin/v1","name":"` + name + `","version":"` + version + `","description":"a test plugin",
	 "runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/x","intercepts":["tool.before"],"capabilities":["interceptors"]}}`
}

// makePluginDir creates the plugin directory dir holding manifest and an
// executable bin/x, and returns dir.
func makePluginDir(t *testing.T, dir, manifest string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "x"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mustRun runs exthost and fails the test unless it exits 0; it returns
// the standard output.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := runExthost("", args...)
	if code != 0 {
		t.Fatalf("exthost %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
	}
	return out
}

// listFields runs list on home and returns each line split into its
// space-separated words.
func listFields(t *testing.T, home string) [][]string {
	t.Helper()
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSuffix(mustRun(t, "list", "-home", home), "\n"), "\n") {
		lines = append(lines, strings.Fields(l))
	}
	return lines
}

// wantList checks that list on home prints exactly the lines want, each
// given as its words.
func wantList(t *testing.T, home string, want ...string) {
	t.Helper()
	got := listFields(t, home)
	if len(got) != len(want) {
		t.Fatalf("list printed %d lines %q, want %d: %q", len(got), got, len(want), want)
	}
	for i := range want {
		if g := strings.Join(got[i], " "); g != want[i] {
			t.Errorf("list line %d = %q, want %q", i, g, want[i])
		}
	}
}

// noRawEscape fails the test when any of outputs holds a raw ESC byte.
func noRawEscape(t *testing.T, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		if strings.ContainsRune(o, 0x1b) {
			t.Errorf("output holds a raw ESC byte: %q", o)
		}
	}
}

func TestInstallPrintsTheFullTrustBlockThenInstallsACopy(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0"))
	out := mustRun(t, "install", "-home", home, dir)

	// The preview, printed before the copy existed, is the block of the
	// copy: where it runs from, and its command there.
	trust, err := extension.TrustPlugin(filepath.Join(home, "plugins", "acme"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, trust.Text()) {
		t.Errorf("install does not open with the FULL TRUST block of the copy:\n%s\nwant:\n%s", out, trust.Text())
	}
	installed := "installed plugin acme version 1.0.0 in " + home + ", copied to " + filepath.Join(home, "plugins", "acme") + "\n"
	if !strings.HasSuffix(out, installed) {
		t.Errorf("install does not end with %q:\n%s", installed, out)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins", "acme", "bin", "x")); err != nil {
		t.Errorf("the copy lacks bin/x: %v", err)
	}
	wantList(t, home, "acme 1.0.0 enabled copied FULL TRUST")
}

// TestInstallPrintsTheBlockBeforeWritingAnything: the preview does not
// depend on the install, so it shows even when the install then fails.
func TestInstallPrintsTheBlockBeforeWritingAnything(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.WriteFile(home, nil, 0o644); err != nil { // a file, so no home can be made there
		t.Fatal(err)
	}
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0"))
	code, out, errs := runExthost("", "install", "-home", home, dir)
	if code != 1 || !strings.Contains(errs, "exthost install:") {
		t.Fatalf("exit %d, stderr %q; want 1 with the install's error", code, errs)
	}
	if !strings.HasPrefix(out, `FULL TRUST: plugin "acme", version "1.0.0"`) || strings.Contains(out, "installed plugin") {
		t.Errorf("stdout should be the FULL TRUST block alone:\n%s", out)
	}
}

func TestInstallOfAManifestTheLaunchGateRefusesWritesNothing(t *testing.T) {
	for name, c := range map[string]struct{ manifest, stderr string }{
		"not JSON":       {`{"apiVersion":`, "not valid JSON"},
		"bad priority":   {`{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/x","priority":5000}}`, "runtime.priority"},
		"shell command":  {`{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/bin/sh"}}`, "runtime command is a shell"},
		"no name":        {`{"apiVersion":"reasonix.io/plugin/v1","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/x"}}`, "name: missing or blank"},
		"ESC in name":    {`{"apiVersion":"reasonix.io/plugin/v1","name":"evil\u001b[31m","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/x"}}`, "name: contains the control character U+001B"},
		"ESC in summary": {`{"apiVersion":"reasonix.io/plugin/v1","name":"p","description":"\u001b[2J","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/x"}}`, "description: contains the control character U+001B"},
	} {
		t.Run(name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			dir := makePluginDir(t, filepath.Join(t.TempDir(), "p"), c.manifest)
			code, out, errs := runExthost("", "install", "-home", home, dir)
			if code != 1 || !strings.Contains(errs, c.stderr) {
				t.Fatalf("exit %d, stderr %q; want 1 naming %q", code, errs, c.stderr)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			noRawEscape(t, out, errs)
			if _, err := os.Stat(filepath.Join(home, "plugin-packages.json")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("plugin-packages.json was written (stat: %v)", err)
			}
		})
	}
}

func TestInstallOfAPluginWithoutASidecarSaysSoAndInstalls(t *testing.T) {
	home := t.TempDir()
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "plain"), `{"apiVersion":"reasonix.io/plugin/v1","name":"plain","version":"0.2.0"}`)
	out := mustRun(t, "install", "-home", home, dir)
	if !strings.Contains(out, "has no sidecar") || strings.Contains(out, "FULL TRUST:") {
		t.Errorf("install should say there is no sidecar, without a FULL TRUST block:\n%s", out)
	}
	wantList(t, home, "plain 0.2.0 enabled copied")
}

func TestInstallLinkRecordsTheDirectoryInPlace(t *testing.T) {
	home := t.TempDir()
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0"))
	out := mustRun(t, "install", "-home", home, "-link", "-name", "guard", dir)
	for _, want := range []string{`FULL TRUST: plugin "guard"`, `manifest name:  "acme"`, "linked:         yes: runs in place", "installed plugin guard version 1.0.0 in " + home + ", linked in place at " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	pkgs, err := extension.LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 || !pkgs[0].Linked || pkgs[0].Root != dir || pkgs[0].Name != "guard" {
		t.Errorf("record %+v, want guard linked at %s", pkgs, dir)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a linked install made %s/plugins (stat: %v)", home, err)
	}
	wantList(t, home, "guard 1.0.0 enabled linked FULL TRUST")
}

func TestDisableAndEnableChangeWhatListShows(t *testing.T) {
	home := t.TempDir()
	mustRun(t, "install", "-home", home, makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0")))
	mustRun(t, "install", "-home", home, "-link", makePluginDir(t, filepath.Join(t.TempDir(), "beta"), sidecarManifest("beta", "")))

	if out := mustRun(t, "disable", "-home", home, "acme"); out != "disabled plugin acme in "+home+": it will not launch until enabled\n" {
		t.Errorf("disable printed %q", out)
	}
	wantList(t, home, "acme 1.0.0 disabled copied FULL TRUST", "beta unversioned enabled linked FULL TRUST")

	if out := mustRun(t, "enable", "-home", home, "acme"); out != "enabled plugin acme in "+home+"\n" {
		t.Errorf("enable printed %q", out)
	}
	wantList(t, home, "acme 1.0.0 enabled copied FULL TRUST", "beta unversioned enabled linked FULL TRUST")
}

func TestRemoveDeletesTheRecordAndTheCopy(t *testing.T) {
	home := t.TempDir()
	mustRun(t, "install", "-home", home, makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0")))
	linked := makePluginDir(t, filepath.Join(t.TempDir(), "beta"), sidecarManifest("beta", "2.0.0"))
	mustRun(t, "install", "-home", home, "-link", linked)

	if out := mustRun(t, "remove", "-home", home, "acme"); out != "removed plugin acme from "+home+"\n" {
		t.Errorf("remove printed %q", out)
	}
	wantList(t, home, "beta 2.0.0 enabled linked FULL TRUST")
	if _, err := os.Stat(filepath.Join(home, "plugins", "acme")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy is still there (stat: %v)", err)
	}

	mustRun(t, "remove", "-home", home, "beta")
	if out := mustRun(t, "list", "-home", home); out != "no plugins installed in "+home+"\n" {
		t.Errorf("list after removing everything printed %q", out)
	}
	if _, err := os.Stat(filepath.Join(linked, extension.ManifestFile)); err != nil {
		t.Errorf("removing a linked plugin touched its directory: %v", err)
	}
}

func TestEnableDisableRemoveOfAnUnknownNameExitOne(t *testing.T) {
	home := t.TempDir()
	for _, cmd := range []string{"enable", "disable", "remove"} {
		code, out, errs := runExthost("", cmd, "-home", home, "nope")
		if code != 1 || out != "" || !strings.Contains(errs, `plugin "nope" failed `+cmd+": plugin is not installed") || !strings.Contains(errs, "exthost list -home "+home) {
			t.Errorf("%s nope: exit %d, stdout %q, stderr %q; want 1 saying it is not installed and how to list", cmd, code, out, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "plugin-packages.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed change wrote plugin-packages.json (stat: %v)", err)
	}
}

func TestPluginCommandsWithTheWrongArgumentsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"install"}, {"install", "a", "b"}, {"install", "-bogus", "a"},
		{"list", "extra"},
		{"enable"}, {"enable", "a", "b"}, {"disable"}, {"remove"}, {"remove", "a", "b"},
	} {
		code, _, errs := runExthost("", args...)
		if code != 2 || !strings.Contains(errs, "usage: exthost "+args[0]) {
			t.Errorf("exthost %q: exit %d, stderr %q; want 2 with the usage", args, code, errs)
		}
	}
}

func TestListOfAHomeWithoutARecordSaysNoPlugins(t *testing.T) {
	home := filepath.Join(t.TempDir(), "missing")
	if out := mustRun(t, "list", "-home", home); out != "no plugins installed in "+home+"\n" {
		t.Errorf("list printed %q", out)
	}
	if _, err := os.Stat(home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list created the home (stat: %v)", err)
	}
}

// setUserHome points os.UserHomeDir at dir for the test.
func setUserHome(t *testing.T, dir string) {
	t.Setenv("HOME", dir)
	t.Setenv("USERPROFILE", dir) // Windows
	t.Setenv("home", dir)        // Plan 9
}

func TestPluginCommandsDefaultToDotReasonixInTheUserHome(t *testing.T) {
	user := t.TempDir()
	setUserHome(t, user)
	home := filepath.Join(user, ".reasonix")
	mustRun(t, "install", makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0")))
	if _, err := os.Stat(filepath.Join(home, "plugin-packages.json")); err != nil {
		t.Errorf("install without -home did not use %s: %v", home, err)
	}
	mustRun(t, "disable", "acme")
	wantList(t, home, "acme 1.0.0 disabled copied FULL TRUST")
}

func TestPluginCommandsWithoutAUserHomeAskForHome(t *testing.T) {
	setUserHome(t, "")
	for _, args := range [][]string{{"list"}, {"enable", "acme"}, {"install", t.TempDir()}} {
		code, out, errs := runExthost("", args...)
		if code != 1 || !strings.Contains(errs, "pass -home DIR") {
			t.Errorf("exthost %q: exit %d, stderr %q; want 1 asking for -home", args, code, errs)
		}
		if out != "" {
			t.Errorf("exthost %q printed %q before failing", args, out)
		}
	}
}

func TestListShowsAnUnreadableManifestOnItsOwnLine(t *testing.T) {
	home := t.TempDir()
	mustRun(t, "install", "-home", home, makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0")))
	mustRun(t, "install", "-home", home, makePluginDir(t, filepath.Join(t.TempDir(), "beta"), sidecarManifest("beta", "")))
	manifest := filepath.Join(home, "plugins", "acme", extension.ManifestFile)
	if err := os.WriteFile(manifest, []byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"acme","runtime":{"command":""}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(home, "plugins", "beta", extension.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(mustRun(t, "list", "-home", home), "\n")
	if want := "acme  1.0.0        enabled  copied  error: " + manifest + ": runtime.command: missing or blank"; !strings.HasPrefix(lines[0], want) {
		t.Errorf("line 0 = %q, want it to start %q", lines[0], want)
	}
	if want := "beta  unversioned  enabled  copied  error: " + filepath.Join(home, "plugins", "beta", extension.ManifestFile) + ": the plugin directory has no " + extension.ManifestFile; !strings.HasPrefix(lines[1], want) {
		t.Errorf("line 1 = %q, want it to start %q", lines[1], want)
	}
}

func TestListMarksAnEarlierProjectRuntimeDisabledD8(t *testing.T) {
	home := t.TempDir()
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0"))
	record := `{"version":1,"packages":[{"name":"acme","root":` + strconv.Quote(dir) + `,"enabled":true,"scope":"project","linked":true}]}`
	if err := os.WriteFile(filepath.Join(home, "plugin-packages.json"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	wantList(t, home, "acme 1.0.0 disabled linked read from this project's earlier shape of the record, which the first change rewrites in upstream's; "+
		"installed at project level, so disabled: project configuration never launches a runtime, FULL TRUST")
	// The first change rewrites the record and says what it changed.
	out := mustRun(t, "disable", "-home", home, "acme")
	if !strings.Contains(out, "note: acme: read from this project's earlier shape") {
		t.Errorf("disable printed %q, want the migration note", out)
	}
	wantList(t, home, "acme 1.0.0 disabled linked FULL TRUST")
}

// TestInstallShowsAnEscapeInThePluginPathEscapedD27: the FULL TRUST block
// of a linked install (which runs in place) shows a path holding ESC
// escaped, and the install that then refuses it says so escaped too.
func TestInstallShowsAnEscapeInThePluginPathEscapedD27(t *testing.T) {
	home := t.TempDir()
	dir := makePluginDir(t, filepath.Join(t.TempDir(), "evil\x1b[2J"), sidecarManifest("acme", "1.0.0"))
	code, out, errs := runExthost("", "install", "-home", home, "-link", dir)
	if code != 1 || !strings.Contains(errs, "control character in its path") {
		t.Fatalf("exit %d, stderr %q; want 1 refusing the path", code, errs)
	}
	if !strings.Contains(out, `evil\x1b[2J/bin/x"`) || !strings.Contains(errs, `evil\x1b[2J"`) {
		t.Errorf("the path is not shown escaped:\nstdout %q\nstderr %q", out, errs)
	}
	noRawEscape(t, out, errs)
}

// TestListShowsEscapesFromTheHomeAndTheManifestEscapedD27: a manifest
// member name and a home path holding ESC reach list's output escaped.
func TestListShowsEscapesFromTheHomeAndTheManifestEscapedD27(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home\x1b[31m")
	out := mustRun(t, "list", "-home", home)
	if !strings.Contains(out, `home\x1b[31m`) {
		t.Errorf("list of an empty home = %q, want the home escaped", out)
	}
	mustRun(t, "install", "-home", home, makePluginDir(t, filepath.Join(t.TempDir(), "acme"), sidecarManifest("acme", "1.0.0")))
	manifest := filepath.Join(home, "plugins", "acme", extension.ManifestFile)
	if err := os.WriteFile(manifest, []byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"acme","\u001b[2Jx":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runExthost("", "list", "-home", home)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{`home\x1b[31m`, `\x1b[2Jx`} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q: %q", want, out)
		}
	}
	noRawEscape(t, out, errs)
	code, out, errs = runExthost("", "enable", "-home", home, "nope")
	if code != 1 || !strings.Contains(errs, `home\x1b[31m`) {
		t.Errorf("enable nope: exit %d, stderr %q; want 1 with the home escaped", code, errs)
	}
	noRawEscape(t, out, errs)
}

// TestTrustInstallAndCheckWarnAboutACommandThatCannotRun: a command not
// built yet, or without its executable bit, is named before anything is
// written, by trust, install and check alike (§3.1); check also repeats
// trust's warning about the literal placeholder in args.
func TestTrustInstallAndCheckWarnAboutACommandThatCannotRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "unbuilt")
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"unbuilt","version":"1","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/unbuilt","args":["${REASONIX_PLUGIN_ROOT}/x"],"intercepts":["tool.before"]}}`
	if err := errors.Join(os.MkdirAll(filepath.Join(dir, "bin"), 0o755), os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644)); err != nil {
		t.Fatal(err)
	}
	missing := "warning: the command " + strconv.Quote(filepath.Join(dir, "bin", "unbuilt")) + " does not exist"
	for _, args := range [][]string{{"trust", dir}, {"install", "-home", t.TempDir(), dir}, {"check", "-timeout", "300ms", dir}} {
		_, stdout, stderr := runExthost("", args...)
		if !strings.Contains(stdout+stderr, missing) {
			t.Errorf("exthost %s says nothing of the missing command:\n%s%s", args[0], stdout, stderr)
		}
	}
	_, stdout, stderr := runExthost("", "check", "-timeout", "300ms", dir)
	if !strings.Contains(stdout, "warning: args[0] holds the literal ${REASONIX_PLUGIN_ROOT}") {
		t.Errorf("check does not repeat the args warning:\n%s%s", stdout, stderr)
	}
	if runtime.GOOS == "windows" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "unbuilt"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stdout, _ := runExthost("", "trust", dir); !strings.Contains(stdout, "is not an executable file") {
		t.Errorf("trust says nothing of a command without its x bit:\n%s", stdout)
	}
}
