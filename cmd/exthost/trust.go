package main

import (
	"flag"
	"fmt"

	"github.com/reasonix-ext/extension"
)

// trustCommand prints the FULL TRUST block of a plugin directory: what
// installing it would let its sidecar do.
func trustCommand(fs *flag.FlagSet) func(*env) int {
	id := fs.String("name", "", "the plugin ID it would be installed as (default: the manifest's name)")
	return func(e *env) int {
		if len(e.args) != 1 {
			e.usage()
			return 2
		}
		t, err := extension.TrustPlugin(e.args[0], *id)
		if err == nil {
			fmt.Fprint(e.stdout, t.Text())
		}
		return e.exit(err)
	}
}
