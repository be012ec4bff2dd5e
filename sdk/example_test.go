package sdk_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// The sidecar of the package doc. In a real sidecar, main calls Serve with
// exactly these options and nothing else: Serve then owns the process's
// stdin and stdout. Here Stdin and Stdout are pipes so that the example
// can play the host, one frame at a time, and print the answers.
func Example() {
	noRM := sdk.Options{
		Name: "no-rm", Version: "0.1.0",
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
				var tool extension.ToolPayload
				if err := c.Decode(&tool); err != nil {
					return sdk.Verdict{}, err
				}
				if tool.Name == "rm" {
					return sdk.Block("rm is not allowed here"), nil
				}
				return sdk.Continue(), nil
			},
		},
	}

	// The host's ends of the sidecar's stdin and stdout.
	stdinR, host := io.Pipe()
	answers, stdoutW := io.Pipe()
	noRM.Stdin, noRM.Stdout = stdinR, stdoutW
	served := make(chan error, 1)
	go func() { served <- sdk.Serve(context.Background(), noRM) }()

	in := bufio.NewScanner(answers)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"extension/initialize","params":{"protocolVersion":"1","protocolId":"reasonix.extension.v1","manifest":{"intercepts":["tool.before"]},"session":{"sessionId":"s-1","workspaceRoot":"/ws","generation":1},"capabilities":{"contentRefs":true,"uiHost":"headless","protocolVersion":"1"}}}`,
		`{"jsonrpc":"2.0","method":"extension/initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"extension/intercept","params":{"event":"tool.before","seq":1,"payload":{"name":"rm","arguments":"{}"},"timeoutMillis":5000}}`,
		`{"jsonrpc":"2.0","id":3,"method":"extension/intercept","params":{"event":"tool.before","seq":2,"payload":{"name":"ls","arguments":"{}"},"timeoutMillis":5000}}`,
		`{"jsonrpc":"2.0","id":4,"method":"extension/shutdown","params":{"timeoutMillis":5000}}`,
	} {
		fmt.Fprintln(host, frame)
		if strings.Contains(frame, `"id":`) { // a request: wait for its answer
			in.Scan()
			fmt.Println(in.Text())
		}
	}
	host.Close()
	fmt.Println("Serve:", <-served)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"no-rm","version":"0.1.0","subscriptions":["tool.before"],"stateSchemaVersion":0}}
	// {"jsonrpc":"2.0","id":2,"result":{"decision":"block","reason":"rm is not allowed here"}}
	// {"jsonrpc":"2.0","id":3,"result":{"decision":"continue"}}
	// {"jsonrpc":"2.0","id":4,"result":{"accepted":true}}
	// Serve: <nil>
}

// echoModel streams the last message of each request back, then done.
type echoModel struct{}

func (echoModel) Catalog(context.Context) ([]extension.ProviderDescriptor, error) {
	return []extension.ProviderDescriptor{{Ref: "plugin/echo/echo/v1", Model: "v1"}}, nil
}

func (echoModel) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	m := open.Request.Messages
	if len(m) == 0 {
		return nil, errors.New("nothing to echo")
	}
	return slices.Values([]extension.ProviderChunk{sdk.Text(m[len(m)-1].Content), sdk.Done()}), nil
}

// A sidecar that serves a model: Providers declares it, Provider serves
// it. The host plays its part by hand, as in the package example.
func ExampleProvider() {
	echo := sdk.Options{
		Name: "echo", Version: "0.1.0",
		Providers: []extension.ProviderDescriptor{{Ref: "plugin/echo/echo/v1", Model: "v1"}},
		Provider:  echoModel{},
	}
	stdinR, host := io.Pipe()
	answers, stdoutW := io.Pipe()
	echo.Stdin, echo.Stdout = stdinR, stdoutW
	served := make(chan error, 1)
	go func() { served <- sdk.Serve(context.Background(), echo) }()

	in := bufio.NewScanner(answers)
	for _, step := range []struct {
		frame string
		reads int // the frames that answer it
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"extension/initialize","params":{"protocolVersion":"1","protocolId":"reasonix.extension.v1","manifest":{"capabilities":["providers"]},"session":{"sessionId":"s-1","workspaceRoot":"/ws","generation":1},"capabilities":{"contentRefs":true,"uiHost":"headless","protocolVersion":"1"}}}`, 1},
		{`{"jsonrpc":"2.0","method":"extension/initialized","params":{}}`, 0},
		{`{"jsonrpc":"2.0","id":2,"method":"extension/provider/stream/open","params":{"streamId":"es_0123456789abcdef01234567","providerRef":"plugin/echo/echo/v1","model":"v1","request":{"messages":[{"role":"user","content":"hi"}],"tools":[],"maxTokens":0},"seqBase":1}}`, 4},
		{`{"jsonrpc":"2.0","id":3,"method":"extension/shutdown","params":{"timeoutMillis":5000}}`, 1},
	} {
		fmt.Fprintln(host, step.frame)
		for range step.reads {
			in.Scan()
			fmt.Println(in.Text())
		}
	}
	host.Close()
	fmt.Println("Serve:", <-served)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"echo","version":"0.1.0","providers":[{"ref":"plugin/echo/echo/v1","model":"v1"}],"stateSchemaVersion":0}}
	// {"jsonrpc":"2.0","id":2,"result":{"accepted":true}}
	// {"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"es_0123456789abcdef01234567","seq":1,"chunk":{"type":"text","text":"hi"}}}
	// {"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"es_0123456789abcdef01234567","seq":2,"chunk":{"type":"done"}}}
	// {"jsonrpc":"2.0","method":"extension/provider/stream/end","params":{"streamId":"es_0123456789abcdef01234567","lastSeq":2}}
	// {"jsonrpc":"2.0","id":3,"result":{"accepted":true}}
	// Serve: <nil>
}
