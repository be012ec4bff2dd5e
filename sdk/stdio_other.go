//go:build !unix

package sdk

import "os"

// pollable returns f: outside Unix the standard streams stay as they are.
func pollable(f *os.File) *os.File { return f }
