//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package extension

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f, waiting for other holders.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// unlockFile releases the lock at once. Closing f alone would release it
// only once no copy of the descriptor is open, and a sidecar being started
// at that moment holds one from its fork to its exec.
func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
