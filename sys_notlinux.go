//go:build !linux

package extension

import "os"

// growPipe leaves the pipe's buffer as it is outside Linux.
func growPipe(*os.File) {}
