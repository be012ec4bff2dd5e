package extension

import (
	"os"
	"path/filepath"
	"sync"
)

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
		return &PackagesError{Path: filepath.Join(home, packagesFile), Msg: "cannot create home: " + err.Error(), Err: err}
	}
	path := filepath.Join(home, packagesLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return &PackagesError{Path: path, Msg: "cannot open the lock: " + err.Error(), Err: err}
	}
	defer f.Close() // closing the file releases the lock too
	if err := lockFile(f); err != nil {
		return &PackagesError{Path: path, Msg: "cannot lock: " + err.Error(), Err: err}
	}
	defer unlockFile(f)
	pkgs, err := LoadPackages(home)
	if err != nil {
		return err
	}
	if err := fn(&pkgs); err != nil {
		return err
	}
	if err := savePackages(home, pkgs); err != nil {
		return err
	}
	if after != nil {
		return after()
	}
	return nil
}
