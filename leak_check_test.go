package extension_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestLeakCheckNoticesWhatATestLeaves leaks on purpose a goroutine of
// ours, a descriptor and a child process, and finds the leak check
// naming each; once they are released it finds nothing.
func TestLeakCheckNoticesWhatATestLeaves(t *testing.T) {
	base := snapshot()
	started, stop := make(chan struct{}), make(chan struct{})
	go leakyGoroutine(started, stop)
	<-started // inside leakyGoroutine: its stack names it
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"goroutine github.com/reasonix-ext/extension_test.leakyGoroutine"}
	var child *exec.Cmd
	if runtime.GOOS == "linux" {
		child = exec.Command("sleep", "30")
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		want = append(want, "descriptor "+os.Args[0], "child processes")
	}
	extra := snapshot().excess(base)
	for _, w := range want {
		if !strings.Contains(strings.Join(extra, "\n"), w) {
			t.Errorf("the leak check does not name %q; it found %q", w, extra)
		}
	}
	close(stop)
	f.Close()
	if child != nil {
		child.Process.Kill()
		child.Wait()
	}
	if extra := leftSince(base); len(extra) > 0 {
		t.Errorf("after the release it still finds %q", extra)
	}
}

func leakyGoroutine(started, stop chan struct{}) {
	close(started)
	<-stop
}
