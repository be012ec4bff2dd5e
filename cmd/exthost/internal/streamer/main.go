// Command streamer is the SDK sidecar of exthost bench's
// stream_throughput and content_8mib figures and the child of their
// baselines. As a sidecar it serves plugin/<id>/bench/text, whose stream
// is as many text chunks as the request's last message says, and answers
// input.receive continue once the SDK has read and verified its payload,
// however large. With -pipe it reads lines "<count> <streamId>" and
// writes that many of the same chunk frames for each, as the SDK numbers
// them, through a buffered writer flushed when full and at the end. With
// -content it reads lines of base64 until an empty one, decodes and
// hashes them, and answers the hex SHA-256.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strconv"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// Text is the text of every chunk.
const Text = "a streamed piece of text "

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "-pipe":
		err = pipe()
	case len(os.Args) > 1 && os.Args[1] == "-content":
		err = content()
	default:
		id := cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), "streamer")
		err = sdk.Serve(context.Background(), sdk.Options{
			Name: id, Version: "1.0.0",
			Providers: []extension.ProviderDescriptor{{Ref: "plugin/" + id + "/bench/text", Model: "text"}},
			Provider:  texts{},
			Intercept: map[extension.Point]sdk.InterceptFunc{
				extension.InputReceive: func(context.Context, *sdk.Call) (sdk.Verdict, error) { return sdk.Continue(), nil },
			},
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

// content is the content_pipe baseline's child.
func content() error {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	h := sha256.New()
	var buf []byte
	for {
		line, err := in.ReadSlice('\n') // a page's line, 349,528 bytes, fits the buffer
		if err == io.EOF {
			return nil // the bench is done
		} else if err != nil {
			return err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			fmt.Println(hex.EncodeToString(h.Sum(nil)))
			h.Reset()
			continue
		}
		buf = slices.Grow(buf[:0], base64.StdEncoding.DecodedLen(len(line)))[:base64.StdEncoding.DecodedLen(len(line))]
		n, err := base64.StdEncoding.Decode(buf, line)
		if err != nil {
			return err
		}
		h.Write(buf[:n])
	}
}
