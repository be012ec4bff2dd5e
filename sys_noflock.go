//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package extension

import "os"

// Without flock(2) in the standard library, only packagesMu serializes
// writers, those of this process (see updatePackages).
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) {}
