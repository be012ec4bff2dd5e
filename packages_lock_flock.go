//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package extension

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f, waiting for other holders.
// Closing f releases it: Go opens files close-on-exec, so no child holds
// a copy of the descriptor.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
