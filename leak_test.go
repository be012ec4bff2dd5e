package extension_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// resources is what the test process holds at one moment: the goroutines
// running this module's code, its open file descriptors and its child
// processes (the last two from /proc, leak_linux_test.go).
type resources struct {
	goroutines []string          // the first function of ours on each stack
	stacks     map[string]string // a stack of each, to show
	fds        []string          // what each is open on
	children   []string          // "pid state command"
}

// snapshot reads the resources held now.
func snapshot() resources {
	g, stacks := ourGoroutines()
	return resources{goroutines: g, stacks: stacks, fds: openFDs(), children: childProcesses()}
}

// ourGoroutines lists the goroutines with a frame of this module, other
// than the caller's own, by the first such frame, with a stack of each.
func ourGoroutines() ([]string, map[string]string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	stacks := map[string]string{}
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // this goroutine: the one taking the snapshot
		}
		if id := goroutineID(g); id != "" {
			out, stacks[id] = append(out, id), g
		}
	}
	slices.Sort(out)
	return out, stacks
}

// goroutineID names a goroutine of ours by its entry, the deepest frame
// of ours on its stack, which a goroutine keeps all its life, or, before
// it first runs, by the function of ours that created it; "" for a
// goroutine that is not ours. This module starts goroutines with
// WaitGroup.Go too, so one that sync created counts as ours.
func goroutineID(stack string) string {
	const ours = "github.com/reasonix-ext/extension"
	entry, creator := "", ""
	for _, line := range strings.Split(stack, "\n") {
		if c, ok := strings.CutPrefix(line, "created by "); ok {
			creator, _, _ = strings.Cut(c, " in goroutine")
		} else if strings.HasPrefix(line, ours) {
			entry = line[:max(strings.LastIndexByte(line, '('), 0)] // without the arguments
		}
	}
	switch {
	case entry != "":
		return entry
	case strings.HasPrefix(creator, ours) || creator == "sync.(*WaitGroup).Go":
		return "created by " + creator
	}
	return ""
}

// excess lists what now holds beyond base: counts per goroutine function,
// descriptors and children that base did not have.
func (now resources) excess(base resources) []string {
	var out []string
	// Goroutines are compared by number: one that has not run yet is
	// named by its creator, later by its entry.
	if len(now.goroutines) > len(base.goroutines) {
		extra := multisetExcess(now.goroutines, base.goroutines)
		out = append(out, fmt.Sprintf("%d goroutines of ours where there were %d", len(now.goroutines), len(base.goroutines)))
		for _, g := range extra {
			out = append(out, "goroutine "+g+" ["+now.stacks[g]+"]")
		}
	}
	for _, f := range multisetExcess(now.fds, base.fds) {
		out = append(out, "descriptor "+f)
	}
	if len(now.children) > len(base.children) {
		out = append(out, fmt.Sprintf("child processes %q (there were %d)", now.children, len(base.children)))
	}
	return out
}

// multisetExcess returns the items of a that outnumber their count in b.
func multisetExcess(a, b []string) []string {
	count := map[string]int{}
	for _, x := range b {
		count[x]++
	}
	var out []string
	for _, x := range a {
		if count[x] > 0 {
			count[x]--
		} else {
			out = append(out, x)
		}
	}
	return out
}

// settledSnapshot is a snapshot once two in a row agree, within leakWait:
// what a start leaves running is there, what it used is gone.
func settledSnapshot() resources {
	deadline := time.Now().Add(leakWait)
	prev := snapshot()
	for {
		time.Sleep(10 * time.Millisecond) // polling the kernel's view, not synchronizing
		now := snapshot()
		if len(now.excess(prev)) == 0 && len(prev.excess(now)) == 0 || time.Now().After(deadline) {
			return now
		}
		prev = now
	}
}

// leakWait is how long what is shutting down may take to be gone.
const leakWait = 5 * time.Second

// leftSince waits up to leakWait for the process to hold no more than
// base and returns what it still holds beyond it.
func leftSince(base resources) []string {
	deadline := time.Now().Add(leakWait)
	for {
		extra := snapshot().excess(base)
		if len(extra) == 0 || time.Now().After(deadline) {
			return extra
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel's view, not synchronizing
	}
}

// checkLeaks fails t at its end if it left goroutines of ours,
// descriptors or child processes behind.
func checkLeaks(t testing.TB) {
	t.Helper()
	base := snapshot()
	t.Cleanup(func() {
		if extra := leftSince(base); len(extra) > 0 {
			t.Errorf("left behind after the test: %s", strings.Join(extra, "; "))
		}
	})
}
