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

// goroutineID names a goroutine of ours by the function of ours that
// created it, which it has from its creation on (one not yet scheduled
// shows no frame of the function it will run), else by the first frame
// of ours on its stack; "" for a goroutine that is not ours.
func goroutineID(stack string) string {
	const ours = "github.com/reasonix-ext/extension"
	first := ""
	for _, line := range strings.Split(stack, "\n") {
		if creator, ok := strings.CutPrefix(line, "created by "); ok && strings.HasPrefix(creator, ours) {
			creator, _, _ = strings.Cut(creator, " in goroutine")
			return "created by " + creator
		}
		if first == "" && strings.HasPrefix(line, ours) {
			first = line[:max(strings.LastIndexByte(line, '('), 0)] // without the arguments
		}
	}
	return first
}

// excess lists what now holds beyond base: counts per goroutine function,
// descriptors and children that base did not have.
func (now resources) excess(base resources) []string {
	var out []string
	for _, g := range multisetExcess(now.goroutines, base.goroutines) {
		out = append(out, "goroutine "+g+" ["+now.stacks[g]+"]")
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
