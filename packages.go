package extension

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// packagesFile is the name of the trust and launch record inside the
// Reasonix home directory: upstream's record, in upstream's shape
// (PROTOCOL.md §3.2, D8).
//
//	{
//	  "version": 1,
//	  "plugins": [
//	    {
//	      "name": "acme",
//	      "source": "/src/acme",
//	      "root": "plugins/acme",
//	      "version": "0.1.0",
//	      "enabled": true
//	    }
//	  ]
//	}
//
// Entries are kept sorted by name, which is the start order (D10). The
// members of PackageEntry are read strictly (D3); members this package
// does not know, at the root or in an entry, are kept and written back
// unchanged. This project's earlier shape, {"version":1,"packages":[…]}
// with "scope" and "linked", is still read, and rewritten in upstream's
// shape by the first change.
//
// Writers coordinate through updatePackages, which holds a lock on
// [packagesLockFile] across the read, the change and the rewrite, so two
// processes that install, enable or remove at once both keep their change.
const packagesFile = "plugin-packages.json"

// maxPackagesBytes bounds the plugin-packages.json [LoadPackages] reads (8 MiB).
const maxPackagesBytes = 8 << 20

// projectConfigDir is the directory of a workspace that holds project
// configuration; a package root inside it is project-level (D8).
const projectConfigDir = ".reasonix"

// Sentinel errors of the packages record and the launch gate, matched with
// [errors.Is]. They arrive wrapped in a [*PluginError], a [*StartError]
// or a [*ManifestError] that names the plugin or the file.
var (
	// errNotInstalled: the plugin has no entry in plugin-packages.json
	// (from SetEnabled and Remove, in a *PluginError). It matches
	// fs.ErrNotExist.
	errNotInstalled error = notInstalled{}
	// errDisabled: the plugin's entry is disabled.
	errDisabled = errors.New("plugin is disabled")
	// ErrNoRuntime: the plugin's manifest declares no runtime.
	ErrNoRuntime = errors.New("manifest declares no runtime")
	// errRelativeCommand: the resolved runtime command is a relative path.
	errRelativeCommand = errors.New("runtime command is a relative path")
	// errBareCommand: the runtime command is a bare name with no directory.
	errBareCommand = errors.New("runtime command is a bare name")
	// errShellCommand: the runtime command is a shell.
	errShellCommand = errors.New("runtime command is a shell")
	// errProjectRuntime: a project-level package declares a runtime.
	errProjectRuntime = errors.New("project configuration cannot declare a runtime")
	// errInvalidPluginName: an installed name that is not a valid plugin ID.
	errInvalidPluginName = errors.New("invalid plugin name")
	// errUnsafeFile: the plugin directory holds a symlink that leaves it
	// (by its text or through another link on the way) or resolves to
	// nothing, a file that is neither regular, a directory nor a symlink,
	// or a file that changed while it was being copied.
	errUnsafeFile = errors.New("unsafe file in plugin directory")
	// errCorruptPackages: plugin-packages.json exists but cannot be used.
	errCorruptPackages = errors.New("corrupt plugin-packages.json")
)

// PackageEntry is one installed plugin: an entry of plugin-packages.json.
type PackageEntry struct {
	// Name is the installed name: the plugin ID (PROTOCOL.md §3.1).
	Name string `json:"name"`
	// Source is the directory the plugin was installed from.
	Source string `json:"source,omitempty"`
	// Root is the package directory, relative to the home directory
	// (slash-separated) or absolute.
	Root string `json:"root"`
	// Version is the installed version; empty means the manifest's.
	Version string `json:"version,omitempty"`
	// Description is the manifest's description when it was installed.
	Description string `json:"description,omitempty"`
	// ManifestKind is upstream's, kept as it was written.
	ManifestKind string `json:"manifestKind,omitempty"`
	// Enabled is false for a package that must not launch.
	Enabled bool `json:"enabled"`
	// Commit is upstream's, kept as it was written.
	Commit string `json:"commit,omitempty"`
	// Unknown holds the members of the entry this package does not know,
	// verbatim; they are written back unchanged (D8).
	Unknown map[string]json.RawMessage `json:"-" proto:"rest"`

	// Linked is true when the package runs in place from the directory it
	// was installed from (InstallOptions.Link): its root lies outside the
	// home directory. It is derived, not stored.
	Linked bool `json:"-"`
	// Notice, when not empty, says how reading the record changed this
	// entry: one of this project's earlier shape is migrated, and one
	// recorded at project level is disabled (D8). It is not stored.
	Notice string `json:"-"`
}

// rootPath returns the absolute package root for the given home.
func (e *PackageEntry) rootPath(home string) string {
	root := filepath.FromSlash(e.Root)
	if !filepath.IsAbs(root) {
		root = filepath.Join(home, root)
	}
	if abs, err := filepath.Abs(root); err == nil {
		return abs
	}
	return filepath.Clean(root)
}

// notInstalled is the error of errNotInstalled.
type notInstalled struct{}

func (notInstalled) Error() string        { return "plugin is not installed" }
func (notInstalled) Is(target error) bool { return target == fs.ErrNotExist }

// findEntry returns the entry installed as name, or nil.
func findEntry(entries []PackageEntry, name string) *PackageEntry {
	if i := slices.IndexFunc(entries, func(e PackageEntry) bool { return e.Name == name }); i >= 0 {
		return &entries[i]
	}
	return nil
}

// validPluginName reports whether name can be an installed name: 1 to 128
// ASCII letters, digits, '.', '_' and '-', starting with a letter or digit.
// Such a name is safe as a directory name, in a provider ref
// plugin/<name>/... and in a slash action /<name>:<action>. Names are
// case-sensitive here, but not on a case-insensitive filesystem, where
// "Acme" and "acme" share one <home>/plugins/ directory (see [Install]).
func validPluginName(name string) bool {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	return name != "" && len(name) <= 128 && strings.IndexByte(alnum, name[0]) >= 0 && strings.Trim(name, alnum+"._-") == ""
}

// LoadPackages reads <home>/plugin-packages.json: the installed packages
// sorted by name, names unique (PROTOCOL.md §3.2). A missing file is an
// empty set; anything else that cannot be used is a [*ManifestError],
// never an empty set.
func LoadPackages(home string) ([]PackageEntry, error) {
	doc, err := readPackages(home)
	return doc.Plugins, err
}

// packagesDoc is the record as it is read: upstream's members, this
// project's earlier "packages", and the root members neither knows.
type packagesDoc struct {
	Version  int64                      `json:"version,omitempty"`
	Plugins  []PackageEntry             `json:"plugins,omitempty"`
	Packages []earlierEntry             `json:"packages,omitempty"`
	Unknown  map[string]json.RawMessage `json:"-" proto:"rest"`
}

// earlierEntry is an entry of this project's earlier record shape.
type earlierEntry struct {
	Name    string `json:"name"`
	Root    string `json:"root"`
	Version string `json:"version,omitempty"`
	Enabled bool   `json:"enabled"`
	Scope   string `json:"scope,omitempty"`
	Linked  bool   `json:"linked,omitempty"`
	Source  string `json:"source,omitempty"`
}

var packagesDocNode = mustNode[packagesDoc]()

// readPackages reads the record of home, the earlier shape migrated into
// Plugins, each entry's Linked derived.
func readPackages(home string) (*packagesDoc, error) {
	path := filepath.Join(home, packagesFile)
	data, err := readBounded(path, maxPackagesBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return &packagesDoc{}, nil
	}
	if err != nil {
		return &packagesDoc{}, &ManifestError{Path: path, Msg: "cannot read: " + err.Error(), Err: err}
	}
	doc, err := parsePackages(data)
	if me, ok := err.(*ManifestError); ok { // every error parsePackages returns
		return &packagesDoc{}, &ManifestError{Path: path, Field: me.Field, Msg: me.Msg + "; fix or reinstall", Err: errCorruptPackages}
	}
	for i := range doc.Plugins {
		doc.Plugins[i].Linked = !insideDir(doc.Plugins[i].rootPath(home), home)
	}
	return doc, nil
}

// parsePackages reads the record through the strict walk; its errors are
// *ManifestError values that readPackages relabels.
func parsePackages(data []byte) (*packagesDoc, error) {
	// The version decides how the rest reads, so it is checked first: a
	// later format reports "unsupported version", not an odd entry.
	var root members
	if err := readDocument(data, "the file", membersNode, &root); err != nil {
		return nil, err
	}
	if err := root.caseVariant("version", "plugins", "packages"); err != nil {
		return nil, err
	}
	if v, err := strconv.ParseInt(string(root["version"]), 10, 64); err == nil && v != 0 && v != 1 {
		return nil, &ManifestError{Field: "version", Msg: fmt.Sprintf("unsupported version %d; this host reads version 1", v)}
	}
	doc := new(packagesDoc)
	if err := readDocument(data, "the file", packagesDocNode(), doc); err != nil {
		return nil, err
	}
	entries := doc.Plugins
	doc.Plugins = nil
	for i, e := range entries {
		if err := doc.add(e, fmt.Sprintf("plugins[%d]", i)); err != nil {
			return nil, err
		}
	}
	for i, e := range doc.Packages { // D8: migrated, nothing lost
		p := PackageEntry{Name: e.Name, Source: e.Source, Root: e.Root, Version: e.Version, Enabled: e.Enabled,
			Notice: "read from this project's earlier shape of the record, which the first change rewrites in upstream's"}
		switch e.Scope {
		case "", "user":
		case "project":
			p.Enabled = false
			p.Notice += "; installed at project level, so disabled: project configuration never launches a runtime"
		default:
			return nil, &ManifestError{Field: fmt.Sprintf("packages[%d].scope", i), Msg: fmt.Sprintf("%q is not a scope; use user or project", e.Scope)}
		}
		if err := doc.add(p, fmt.Sprintf("packages[%d]", i)); err != nil {
			return nil, err
		}
	}
	doc.Packages = nil
	slices.SortStableFunc(doc.Plugins, func(a, b PackageEntry) int { return strings.Compare(a.Name, b.Name) })
	return doc, nil
}

// add checks the entry e, read at field, and adds it to the record.
func (doc *packagesDoc) add(e PackageEntry, field string) error {
	switch {
	case !validPluginName(e.Name):
		return &ManifestError{Field: field + ".name", Msg: fmt.Sprintf("%q is not a valid plugin name", e.Name)}
	case strings.TrimSpace(e.Root) == "":
		return &ManifestError{Field: field + ".root", Msg: "missing or blank"}
	case findEntry(doc.Plugins, e.Name) != nil:
		return &ManifestError{Field: field + ".name", Msg: fmt.Sprintf("%q is installed twice", e.Name)}
	}
	for _, f := range []struct{ name, value string }{{"source", e.Source}, {"root", e.Root}, {"version", e.Version},
		{"description", e.Description}, {"manifestKind", e.ManifestKind}, {"commit", e.Commit}} {
		if err := checkText(f.value, field+"."+f.name); err != nil {
			return err
		}
	}
	doc.Plugins = append(doc.Plugins, e)
	return nil
}

// savePackages writes doc to <home>/plugin-packages.json atomically, in
// upstream's shape: entries sorted by name, each with the members it
// does not know after its own, then the root's. The content goes to a
// temporary file in the same directory, is synced, and replaces the file
// by rename, so a reader sees the old or the new record, never a mix. It
// creates home when missing. It takes no lock: to change the record that
// is on disk, use updatePackages, or a concurrent writer's change can be
// lost.
func savePackages(home string, doc *packagesDoc) error {
	path := filepath.Join(home, packagesFile)
	slices.SortStableFunc(doc.Plugins, func(a, b PackageEntry) int { return strings.Compare(a.Name, b.Name) })
	var b bytes.Buffer
	b.WriteString(`{"version":1,"plugins":[`)
	for i, e := range doc.Plugins {
		if i > 0 {
			b.WriteByte(',')
		}
		entry, _ := json.Marshal(e) // strings and a bool: encoding cannot fail
		b.Write(withMembers(entry, e.Unknown))
	}
	b.WriteString("]}")
	var data bytes.Buffer
	json.Indent(&data, withMembers(b.Bytes(), doc.Unknown), "", "  ") // valid: built from valid JSON
	data.WriteByte('\n')
	// Never write what LoadPackages would reject.
	if _, err := parsePackages(data.Bytes()); err != nil {
		return &ManifestError{Path: path, Msg: "refusing to write an invalid record: " + err.Error(), Err: errCorruptPackages}
	}
	if err := writeFileAtomic(path, data.Bytes()); err != nil {
		return &ManifestError{Path: path, Msg: "cannot write: " + err.Error(), Err: err}
	}
	return nil
}

// withMembers returns the JSON object obj, which has members, with
// members added at its end in name order.
func withMembers(obj []byte, members map[string]json.RawMessage) []byte {
	for _, k := range slices.Sorted(maps.Keys(members)) {
		name, _ := json.Marshal(k)
		obj = append(append(append(append(obj[:len(obj)-1], ','), name...), ':'), members[k]...)
		obj = append(obj, '}')
	}
	return obj
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory and a rename.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	// The first failure counts; the file is closed whatever happened.
	if err = cmp.Or(err, tmp.Chmod(0o644), tmp.Sync(), tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	// Make the rename durable where directories can be synced; elsewhere
	// (Windows) opening a directory fails and the rename stands as is.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// SetEnabled marks the installed plugin name as enabled or disabled; a
// disabled plugin never launches (D8). A name that is not installed fails
// with an error matching fs.ErrNotExist.
func SetEnabled(home, name string, enabled bool) error {
	op := "disable"
	if enabled {
		op = "enable"
	}
	return updateEntry(home, name, op, func(_ *[]PackageEntry, e *PackageEntry) { e.Enabled = enabled }, nil)
}

// Remove deletes the installed plugin name from the record and then, when
// the package is a copy at <home>/plugins/<name>/, deletes that copy. A
// linked directory is left alone. A name that is not installed fails with
// an error matching fs.ErrNotExist.
func Remove(home, name string) error {
	var removed PackageEntry
	// The copy is deleted under the lock too: deleted after it, it could
	// be a concurrent Install's fresh copy of the same name.
	deleteCopy := func() error {
		if !removed.Linked && filepath.ToSlash(removed.Root) == "plugins/"+name {
			return os.RemoveAll(removed.rootPath(home))
		}
		return nil
	}
	return updateEntry(home, name, "remove", func(pkgs *[]PackageEntry, e *PackageEntry) {
		removed = *e
		*pkgs = slices.DeleteFunc(*pkgs, func(x PackageEntry) bool { return x.Name == name })
	}, deleteCopy)
}

// updateEntry is updatePackages for op on the installed plugin name: fn
// gets the record and name's entry in it, and without one the change fails
// with an error matching fs.ErrNotExist. A failure is a [*PluginError] for op.
func updateEntry(home, name, op string, fn func(pkgs *[]PackageEntry, e *PackageEntry), after func() error) error {
	err := updatePackages(home, func(pkgs *[]PackageEntry) error {
		e := findEntry(*pkgs, name)
		if e == nil {
			return errNotInstalled
		}
		fn(pkgs, e)
		return nil
	}, after)
	if err != nil {
		return &PluginError{Plugin: name, Op: op, Err: err}
	}
	return nil
}

// packagesLockFile is the file beside plugin-packages.json that
// updatePackages locks while it reads, changes and rewrites the record.
// It is created on first use and never removed: removing a lock file lets
// two writers lock two different files.
const packagesLockFile = packagesFile + ".lock"

// packagesMu serializes the writers of this process where the platform has
// no file lock (see lockFile); where it has one it is still taken, which
// costs nothing and keeps both paths alike.
var packagesMu sync.Mutex

// updatePackages reads <home>/plugin-packages.json, lets fn change it,
// saves it when fn returns nil and then runs after, if set, for work on
// disk that must not interleave with another writer's (Remove's deletion
// of the copy). It holds an exclusive lock on
// <home>/plugin-packages.json.lock throughout, so that writers in other
// processes (another host, an installer) never overwrite each other's
// change. [Install], [SetEnabled] and [Remove] go through it.
//
// The lock is an advisory flock(2) on Linux, macOS and the BSDs, where it
// is released when the process dies. Elsewhere only the writers of this
// process are serialized. The lock is not reentrant: fn must not call
// Install, SetEnabled or Remove, which would wait for it forever.
func updatePackages(home string, fn func(*[]PackageEntry) error, after func() error) error {
	packagesMu.Lock()
	defer packagesMu.Unlock()
	if err := os.MkdirAll(home, 0o755); err != nil {
		return &ManifestError{Path: filepath.Join(home, packagesFile), Msg: "cannot create home: " + err.Error(), Err: err}
	}
	path := filepath.Join(home, packagesLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return &ManifestError{Path: path, Msg: "cannot open the lock: " + err.Error(), Err: err}
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return &ManifestError{Path: path, Msg: "cannot lock: " + err.Error(), Err: err}
	}
	defer unlockFile(f) // at once, even while a sidecar forked meanwhile holds a copy of f until its exec
	doc, err := readPackages(home)
	if err != nil {
		return err
	}
	if err := fn(&doc.Plugins); err != nil {
		return err
	}
	if err := savePackages(home, doc); err != nil {
		return err
	}
	if after != nil {
		return after()
	}
	return nil
}

// Installing a plugin: recording it in plugin-packages.json and, unless it
// is linked, copying its directory under <home>/plugins/.

// InstallOptions configure [Install].
type InstallOptions struct {
	// Name is the installed name, which becomes the plugin ID; empty means
	// the manifest's name. It must be a valid plugin name (PROTOCOL.md §3.1).
	Name string
	// Link records the plugin directory in place instead of copying it to
	// <home>/plugins/<name>/.
	Link bool
	// Version is the installed version; empty means the manifest's. It may
	// not hold control characters.
	Version string
}

// Install records the plugin in pluginDir as installed and enabled in
// <home>/plugin-packages.json; installing is the consent to run its
// runtime (PROTOCOL.md §3.2). The manifest must parse. Unless
// opts.Link, the directory is copied to <home>/plugins/<name>/: regular
// files keep their permission bits; a symlink is copied as a symlink only
// when its target is relative and the link, followed step by step through
// any other links on the way, never leaves the directory; anything else
// (an escaping or dangling symlink, a device, a pipe) fails the install
// with errUnsafeFile. The copy reads the directory through an [os.Root],
// so a file swapped for a link during the copy is refused too. Installing
// a name that exists replaces its entry, keeping the members this package
// does not know, and enables it.
//
// Names are compared exactly; on a case-insensitive filesystem "Acme" and
// "acme" are two entries that share one <home>/plugins/ directory, so the
// later install replaces the earlier one's files. Concurrent installs,
// also from other processes, are serialized by a lock on the record: the copy
// and the record change happen under its lock.
func Install(home, pluginDir string, opts InstallOptions) (*PackageEntry, error) {
	name := cmp.Or(opts.Name, filepath.Base(pluginDir)) // until the manifest names it
	fail := func(err error) (*PackageEntry, error) {
		return nil, &PluginError{Plugin: name, Op: "install", Err: err}
	}
	m, err := loadManifest(pluginDir)
	if err != nil {
		return fail(err)
	}
	name = cmp.Or(opts.Name, m.Name)
	if !validPluginName(name) {
		return fail(fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-' (InstallOptions.Name overrides the manifest name)", errInvalidPluginName, name))
	}
	src, err := filepath.Abs(pluginDir)
	if err != nil {
		return fail(err)
	}
	// The record holds only text a person can read (D8); refuse before
	// copying anything rather than when saving.
	if err := checkText(opts.Version, "version"); err != nil {
		return fail(err)
	}
	if controlChar(src) >= 0 {
		return fail(fmt.Errorf("the plugin directory %q has a control character in its path; move it", src))
	}
	e := PackageEntry{Name: name, Version: cmp.Or(opts.Version, m.Version), Description: m.Description, Enabled: true, Linked: opts.Link, Source: src}
	err = updatePackages(home, func(pkgs *[]PackageEntry) error {
		// The copy happens under the lock, so two installs of one name
		// cannot interleave their copies.
		e.Root = src
		if !opts.Link {
			if err := copyInto(home, src, name); err != nil {
				return err
			}
			e.Root = "plugins/" + name
		}
		if old := findEntry(*pkgs, name); old != nil {
			e.Unknown = old.Unknown // what another tool wrote stays (D8)
			*old = e
		} else {
			*pkgs = append(*pkgs, e)
		}
		return nil
	}, nil)
	if err != nil {
		return fail(err)
	}
	return &e, nil
}

// copyInto copies src to <home>/plugins/<name> through a temporary
// sibling directory, so a failed copy leaves any previous install intact.
// It refuses when the plugins directory lies inside src, also when home
// reaches it through a symlink, since the copy would then copy itself.
func copyInto(home, src, name string) error {
	plugins := filepath.Join(home, "plugins")
	// insideDir resolves the links of as much of the path as exists, so
	// this holds before anything is created.
	if insideDir(plugins, src) {
		return fmt.Errorf("the home directory %s is inside the plugin directory %s; install with Link or from elsewhere", home, src)
	}
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(plugins, "."+name+".*.install")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(src, tmp); err != nil {
		return err
	}
	dst := filepath.Join(plugins, name)
	old := tmp + ".old"
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Rename(old, dst)
		return err
	}
	return os.RemoveAll(old)
}

// copyTree copies the directory src into the existing, empty directory
// dst. Both are opened as an [os.Root], so nothing is read from outside
// src or written outside dst whatever links the tree holds; dst itself is
// skipped if the walk meets it.
func copyTree(src, dst string) error {
	sr, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer sr.Close()
	dr, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer dr.Close()
	self, err := os.Stat(dst)
	if err != nil {
		return err
	}
	return fs.WalkDir(sr.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.FromSlash(name)
		info, err := sr.Lstat(rel)
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if os.SameFile(info, self) {
				return fs.SkipDir // never copy the copy into itself
			}
			if name == "." {
				return os.Chmod(dst, mode.Perm()|0o700)
			}
			return dr.Mkdir(rel, mode.Perm()|0o700)
		case mode.IsRegular():
			return copyFile(sr, dr, rel, info)
		case mode&fs.ModeSymlink != 0:
			link, err := sr.Readlink(rel)
			if err != nil {
				return err
			}
			if filepath.IsAbs(link) || !filepath.IsLocal(filepath.Join(filepath.Dir(rel), link)) {
				return fmt.Errorf("%w: symlink %s points outside the plugin directory (%s)", errUnsafeFile, rel, link)
			}
			// The text stays inside, but a link on the way (d/e/f -> ../..)
			// can still lead out: follow the whole chain inside the root,
			// which refuses any step above it.
			if _, err := sr.Stat(rel); err != nil {
				return fmt.Errorf("%w: symlink %s (%s) does not resolve inside the plugin directory: %v", errUnsafeFile, rel, link, err)
			}
			return dr.Symlink(link, rel)
		default:
			return fmt.Errorf("%w: %s is a %s, not a regular file", errUnsafeFile, rel, mode.Type())
		}
	})
}

// copyFile copies the regular file rel, whose Lstat is info, from sr to
// dr. The file opened must be the one inspected: if it was swapped for a
// symlink (or anything else) in between, the copy fails with
// errUnsafeFile instead of following it.
func copyFile(sr, dr *os.Root, rel string, info fs.FileInfo) error {
	in, err := sr.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if got, err := in.Stat(); err != nil {
		return err
	} else if !got.Mode().IsRegular() || !os.SameFile(got, info) {
		return fmt.Errorf("%w: %s changed while it was being copied", errUnsafeFile, rel)
	}
	perm := info.Mode().Perm()
	out, err := dr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	// The umask may have narrowed perm; the first failure counts, and the
	// file is closed whatever happened.
	return cmp.Or(err, out.Chmod(perm), out.Close())
}
