//go:build !linux

package sdk

import (
	"io"
	"os"
)

// stdinReader returns what Serve reads stdin through: outside Linux, the
// file as pollable makes it.
func stdinReader(f *os.File) io.ReadCloser { return pollable(f) }
