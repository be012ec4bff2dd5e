package extension_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pidOf reads the pid a fixture of plugin name wrote at start.
func pidOf(t *testing.T, home, name string) int {
	t.Helper()
	return readPid(t, filepath.Join(pluginDirs[home+"/"+name], "pid"))
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the fixture wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// procStat returns the state and process group of pid from /proc, and
// whether the process exists.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0, false
	}
	g, _ := strconv.Atoi(f[2])
	return f[0][0], g, true
}

// assertGone checks /proc that pid runs no more and that no live process
// is left in the group it led (D12). Zombies waiting for a reaper that is
// not us count as gone.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if state, _, ok := procStat(pid); ok && state != 'Z' {
		t.Errorf("process %d is still running (state %c)", pid, state)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		other, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(other); ok && pgrp == pid && state != 'Z' {
			t.Errorf("process %d of group %d is still running (state %c)", other, pid, state)
		}
	}
}
