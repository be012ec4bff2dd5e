// Command echoline is the peer of exthost bench's spawn_1 and spawn_4
// baselines: the least a process can do to be "ready". It writes back
// the first line it reads, then reads until EOF and exits. It imports
// only bufio and os, so its own start-up is as small as a Go program's
// can be.
package main

import (
	"bufio"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		os.Exit(1)
	}
	os.Stdout.Write(line)
	for {
		if _, err := in.ReadBytes('\n'); err != nil {
			return // EOF: the bench is done
		}
	}
}
