//go:build linux

package extension_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// openFDs lists what this process's descriptors are open on, from
// /proc/self/fd: a path, or the kind of a pipe, socket or anon inode.
// The descriptor that reading the directory opens is left out.
func openFDs() []string {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	own := strconv.Itoa(int(dir.Fd()))
	var out []string
	for _, n := range names {
		if n == own {
			continue
		}
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", n))
		if kind, _, ok := strings.Cut(target, ":["); ok {
			target = kind // pipe:[123] is a pipe: which one changes with every sidecar
		}
		out = append(out, target)
	}
	slices.Sort(out)
	return out
}

// childProcesses lists this process's children, zombies included, from
// /proc.
func childProcesses() []string {
	entries, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')') // the command may hold spaces
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, e.Name()+" "+f[0]+" "+s[strings.IndexByte(s, '(')+1:i])
		}
	}
	return out
}
