package extension

// Installing a plugin: recording it in plugin-packages.json and, unless it
// is linked, copying its directory under <home>/plugins/.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

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
	// Scope is ScopeUser (the zero value) or ScopeProject.
	Scope Scope
}

// Install records the plugin in pluginDir as installed and enabled in
// <home>/plugin-packages.json; installing is the consent to run its
// runtime (PROTOCOL.md §3.2). The manifest must parse. Unless
// opts.Link, the directory is copied to <home>/plugins/<name>/: regular
// files keep their permission bits; a symlink is copied as a symlink only
// when its target is relative and the link, followed step by step through
// any other links on the way, never leaves the directory; anything else
// (an escaping or dangling symlink, a device, a pipe) fails the install
// with [ErrUnsafeFile]. The copy reads the directory through an [os.Root],
// so a file swapped for a link during the copy is refused too. Installing
// a name that exists replaces the package in its place in the installed
// order and enables it.
//
// Names are compared exactly; on a case-insensitive filesystem "Acme" and
// "acme" are two entries that share one <home>/plugins/ directory, so the
// later install replaces the earlier one's files. Concurrent installs,
// also from other processes, are serialized by a lock on the record: the copy
// and the record change happen under its lock.
func Install(home, pluginDir string, opts InstallOptions) (*PackageEntry, error) {
	m, err := loadManifest(pluginDir)
	if err != nil {
		return nil, &PluginError{Plugin: cmp.Or(opts.Name, filepath.Base(pluginDir)), Op: "install", Err: err}
	}
	name := cmp.Or(opts.Name, m.Name)
	fail := func(err error) (*PackageEntry, error) {
		return nil, &PluginError{Plugin: name, Op: "install", Err: err}
	}
	if !validPluginName(name) {
		return fail(fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-' (InstallOptions.Name overrides the manifest name)", ErrInvalidPluginName, name))
	}
	scope := cmp.Or(opts.Scope, ScopeUser)
	if scope != ScopeUser && scope != ScopeProject {
		return fail(fmt.Errorf("scope %q: use user or project", scope))
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
	e := PackageEntry{Name: name, Version: cmp.Or(opts.Version, m.Version), Enabled: true, Scope: scope, Linked: opts.Link, Source: src}
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
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	plugins, err := filepath.Abs(filepath.Join(home, "plugins"))
	if err != nil {
		return err
	}
	errInside := fmt.Errorf("the home directory %s is inside the plugin directory %s; install with Link or from elsewhere", home, src)
	// Check before creating anything, as far as the path exists (home as
	// given and, when it exists, with its links resolved), and again once
	// it does.
	realHome, err := filepath.EvalSymlinks(home)
	if insideDir(plugins, src) || err == nil && insideDir(filepath.Join(realHome, "plugins"), src) {
		return errInside
	}
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		return err
	}
	if plugins, err = filepath.EvalSymlinks(plugins); err != nil {
		return err
	}
	if insideDir(plugins, src) {
		return errInside
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
				return fmt.Errorf("%w: symlink %s points outside the plugin directory (%s)", ErrUnsafeFile, rel, link)
			}
			// The text stays inside, but a link on the way (d/e/f -> ../..)
			// can still lead out: follow the whole chain inside the root,
			// which refuses any step above it.
			if _, err := sr.Stat(rel); err != nil {
				return fmt.Errorf("%w: symlink %s (%s) does not resolve inside the plugin directory: %v", ErrUnsafeFile, rel, link, err)
			}
			return dr.Symlink(link, rel)
		default:
			return fmt.Errorf("%w: %s is a %s, not a regular file", ErrUnsafeFile, rel, mode.Type())
		}
	})
}

// copyFile copies the regular file rel, whose Lstat is info, from sr to
// dr. The file opened must be the one inspected: if it was swapped for a
// symlink (or anything else) in between, the copy fails with
// [ErrUnsafeFile] instead of following it.
func copyFile(sr, dr *os.Root, rel string, info fs.FileInfo) error {
	in, err := sr.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if got, err := in.Stat(); err != nil {
		return err
	} else if !got.Mode().IsRegular() || !os.SameFile(got, info) {
		return fmt.Errorf("%w: %s changed while it was being copied", ErrUnsafeFile, rel)
	}
	perm := info.Mode().Perm()
	out, err := dr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(perm) // the umask may have narrowed it
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
