// Command fullsidecar is the reference sidecar of Extension Protocol v1;
// its code and its behaviours are package internal/fullsidecar, which
// exthost also runs from its own binary.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/reasonix-ext/extension/internal/fullsidecar"
)

func main() {
	if err := fullsidecar.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "fullsidecar:", err)
		os.Exit(1)
	}
}
