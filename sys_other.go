//go:build !unix

package extension

import (
	"io"
	"os/exec"
)

// directWriter returns nil outside Unix: every frame goes through the
// writer goroutine, whose blocking writes the watchdog can still end.
func directWriter(io.Writer) func([]byte) (int, error) { return nil }

// D12: outside Unix there is no process group to kill; the kill is best
// effort and reaches the sidecar only, not its children.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup kills the sidecar itself through its process handle, which
// stays valid after Wait (a bare pid could be reused).
func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func groupAlive(pid int) bool { return false }
