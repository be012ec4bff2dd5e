// Command starter is the smallest useful sidecar, the one to copy when
// starting a plugin: it subscribes to input.receive and lets every input
// through. Its manifest, reasonix-plugin.json beside this file, is the
// upstream starter shape (PROTOCOL.md §3.1): intercepts
// ["input.receive"], capabilities ["interceptors"], command
// ${REASONIX_PLUGIN_ROOT}/bin/starter-extension.exe.
package main

import (
	"context"
	"log"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

func main() {
	err := sdk.Serve(context.Background(), sdk.Options{
		Name: "starter-extension", Version: "0.1.0",
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.InputReceive: func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
				return sdk.Continue(), nil
			},
		},
	})
	if err != nil {
		log.Fatal(err) // stderr, exit status 1
	}
}
