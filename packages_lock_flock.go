//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package extension

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f, waiting for other holders.
// Closing f releases it once no copy of the descriptor is open: Go opens
// files close-on-exec, so a sidecar being started at that moment holds one
// only from its fork to its exec, and the lock is free right after.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
