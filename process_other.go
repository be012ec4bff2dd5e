//go:build !unix

package extension

import (
	"os"
	"os/exec"
)

// D12: outside Unix there is no process group to kill; the kill is best
// effort and reaches the sidecar only, not its children.
func setProcessGroup(cmd *exec.Cmd) {}

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	return p.Kill()
}

func groupAlive(pid int) bool { return false }
