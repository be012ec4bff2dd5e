// Command observer is the SDK sidecar of exthost bench's
// observe_throughput figure. Its tool.after observer only counts the
// events it receives, so the figure measures delivery, not work; its
// tool.before interceptor answers block with the reason "observed <n>",
// which is how the bench reads the count through the protocol itself.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

func main() {
	// Events are observed on one goroutine while intercepts run on
	// others, hence the atomic.
	var count atomic.Int64
	err := sdk.Serve(context.Background(), sdk.Options{
		Name:    cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), "observer"),
		Version: "1.0.0",
		Observe: map[extension.Point]sdk.ObserveFunc{
			extension.ToolAfter: func(context.Context, *sdk.Event) { count.Add(1) },
		},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
				return sdk.Block(fmt.Sprint("observed ", count.Load())), nil
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		os.Exit(1)
	}
}
