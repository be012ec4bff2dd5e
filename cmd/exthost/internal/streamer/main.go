// Command streamer is the provider sidecar of exthost bench's
// stream_throughput figure and, run with -pipe, the child of its
// stream_pipe baseline. As a sidecar it serves plugin/<id>/bench/text,
// whose stream is as many text chunks as the request's last message
// says. With -pipe it reads lines "<count> <streamId>" and writes that
// many of the same chunk frames for each, as the SDK numbers them,
// through a buffered writer flushed when full and at the end.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"strconv"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// Text is the text of every chunk.
const Text = "a streamed piece of text "

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "-pipe" {
		err = pipe()
	} else {
		id := cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), "streamer")
		err = sdk.Serve(context.Background(), sdk.Options{
			Name: id, Version: "1.0.0",
			Providers: []extension.ProviderDescriptor{{Ref: "plugin/" + id + "/bench/text", Model: "text"}},
			Provider:  texts{},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "streamer:", err)
		os.Exit(1)
	}
}

type texts struct{}

func (texts) Catalog(context.Context) ([]extension.ProviderDescriptor, error) { return nil, nil }

func (texts) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	n := 0
	if m := open.Request.Messages; len(m) > 0 {
		n, _ = strconv.Atoi(m[len(m)-1].Content)
	}
	return func(yield func(extension.ProviderChunk) bool) {
		for range n {
			if !yield(sdk.Text(Text)) {
				return
			}
		}
	}, nil
}

// frame is a notification frame as the SDK writes it.
type frame struct {
	JSONRPC string                      `json:"jsonrpc"`
	Method  string                      `json:"method"`
	Params  extension.StreamChunkParams `json:"params"`
}

func pipe() error {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var n int64
		var id string
		if _, err := fmt.Sscan(in.Text(), &n, &id); err != nil {
			return err
		}
		f := frame{JSONRPC: "2.0", Method: extension.MethodStreamChunk, Params: extension.StreamChunkParams{StreamID: id, Chunk: sdk.Text(Text)}}
		for seq := int64(1); seq <= n; seq++ {
			f.Params.Seq = seq
			b, err := json.Marshal(f)
			if err != nil {
				return err
			}
			out.Write(b)
			out.WriteByte('\n')
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
