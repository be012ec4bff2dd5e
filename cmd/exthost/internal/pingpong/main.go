// Command pingpong is the peer of exthost bench's pingpong_limit and
// pingpong4_limit baselines: the least a sidecar can do with an
// extension/intercept frame. It reads one line at a time, decodes it with
// plain json.Unmarshal into the same DTOs the SDK decodes it into
// (extension.InterceptParams inside an envelope, then the payload into
// extension.ToolPayload, as the reference plugin's tool.before does),
// and answers continue with json.Marshal, on one goroutine, until EOF.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/cmd/exthost/internal/pingdto"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return // EOF: the bench is done with this peer
		}
		var req pingdto.Request
		var tool extension.ToolPayload
		err = json.Unmarshal(line, &req)
		if err == nil {
			err = json.Unmarshal(req.Params.Payload, &tool)
		}
		if err != nil {
			// The bench reads EOF and reports the figure as failed.
			fmt.Fprintln(os.Stderr, "pingpong:", err)
			os.Exit(1)
		}
		b, err := json.Marshal(pingdto.Answer{JSONRPC: "2.0", ID: req.ID, Result: extension.InterceptResult{Decision: extension.DecisionContinue}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "pingpong:", err)
			os.Exit(1)
		}
		out.Write(b)
		out.WriteByte('\n')
		if out.Flush() != nil {
			return // the bench closed the pipe
		}
	}
}
