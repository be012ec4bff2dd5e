package extension

import (
	"os"
	"syscall"
)

// sidecarPipeBytes is the buffer asked for the pipe to a sidecar's stdin
// (Linux only; the kernel caps it at /proc/sys/fs/pipe-max-size, 1 MiB by
// default, and a failure leaves the default 64 KiB). It absorbs a burst
// of events while the sidecar waits for a CPU, so fewer are dropped at
// D20's 16 in flight. Of 100,000 events offered by a tight loop of
// Observe calls on 2 busy cores (go test -bench BenchmarkObserve and
// exthost bench), 4-12% were lost with 64 KiB, up to 12% with 256 KiB,
// up to 9% with 512 KiB, 0-3% with 1 MiB. The kernel counts it against
// the user's pipe-user-pages-soft (64 MiB by default): 64 sidecars'
// worth, far more than a host runs.
const sidecarPipeBytes = 1 << 20

// growPipe asks for a larger buffer for the pipe f writes to.
func growPipe(f *os.File) {
	const fSetPipeSize = 1031 // F_SETPIPE_SZ: F_LINUX_SPECIFIC_BASE + 7
	if raw, err := f.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, sidecarPipeBytes)
		})
	}
}
