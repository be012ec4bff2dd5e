package extension

import (
	"os"
	"syscall"
)

// sidecarPipeBytes is the buffer asked for the pipe to a sidecar's stdin
// (Linux only; the kernel caps it at /proc/sys/fs/pipe-max-size, 1 MiB by
// default, and a failure leaves the default 64 KiB). It absorbs a burst
// of events while the sidecar waits for a CPU, so fewer are dropped at
// D20's 16 in flight (BenchmarkObserve and exthost bench's
// observe_throughput lose fewest events with the largest buffer the
// kernel allows by default). The kernel counts it against
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
