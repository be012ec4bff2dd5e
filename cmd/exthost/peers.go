package main

// The hidden modes: "exthost _run MODE" is the reference plugin's sidecar
// or one of the bench's peers, so that demo, check and bench need nothing
// but this binary (no Go toolchain, no checkout of the module), and both
// sides of a bench ratio start from the same binary. They are not
// commands (help does not list them), and they talk on the process's own
// stdin and stdout.

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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/internal/fullsidecar"
	"github.com/reasonix-ext/extension/sdk"
)

// runArg is the hidden first argument that selects a mode.
const runArg = "_run"

// The modes, by name.
const (
	fullsidecarMode = "fullsidecar"  // the reference plugin's sidecar
	pingpongPeer    = "pingpong"     // the intercept baselines' child
	echolinePeer    = "echoline"     // the startup baselines' child
	observerPeer    = "observer"     // the observe_throughput sidecar
	streamerPeer    = "streamer"     // the stream_throughput and content_8mib sidecar
	streamPipePeer  = "stream-pipe"  // the stream_pipe baseline's child
	contentPipePeer = "content-pipe" // the content_pipe baseline's child
)

// modes are what each mode runs; an error ends the process with status 1.
var modes = map[string]func() error{
	fullsidecarMode: func() error { return fullsidecar.Serve(context.Background()) },
	pingpongPeer:    func() error { return answerLines(answerPing) },
	echolinePeer:    func() error { return answerLines(echoLine) },
	observerPeer:    countEvents,
	streamerPeer:    serveTexts,
	streamPipePeer:  func() error { return answerLines(pipeChunks) },
	contentPipePeer: hashContent,
}

// runMode runs the mode args names and returns the exit status: 2, after
// saying why, for anything but the name of one mode.
func runMode(args []string, stderr io.Writer) int {
	var mode func() error
	if len(args) == 1 {
		mode = modes[args[0]]
	}
	if mode == nil {
		fmt.Fprintf(stderr, "exthost %s: %q is not a mode; exthost runs these as its own sidecars and bench peers: %s\n",
			runArg, strings.Join(args, " "), strings.Join(slices.Sorted(maps.Keys(modes)), ", "))
		return 2
	}
	if err := mode(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// executable is exthost's own path, absolute (as os.Executable returns
// it, and as the launch gate requires) and with symlinks resolved.
// Resolved once, so that the bench's timed spawns do not pay for it.
var executable = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	return exe, err
})

// referencePlugin writes, under work, the reference plugin's directory.
func referencePlugin(work string) (string, error) {
	m, err := extension.ParseManifest([]byte(fullsidecar.Manifest))
	if err != nil {
		return "", err
	}
	return modePlugin(work, fullsidecarMode, m)
}

// modePlugin writes m as the manifest of the plugin directory work/<mode>,
// with runtime.command and runtime.args running this binary in mode. The
// command names the binary by its absolute path: the launch gate expands
// ${REASONIX_PLUGIN_ROOT} only as a command's prefix, and passes args
// verbatim.
func modePlugin(work, mode string, m *extension.Manifest) (string, error) {
	dir := filepath.Join(work, mode)
	exe, err := executable()
	if err == nil {
		m.Runtime.Command, m.Runtime.Args = exe, []string{runArg, mode}
		err = writeManifest(dir, m)
	}
	return dir, err
}

// pingRequest is the frame of the intercept baselines that the bench
// writes, and pingAnswer the one the pingpong peer writes back: around
// the host's own DTOs.
type pingRequest struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Method  string                    `json:"method"`
	Params  extension.InterceptParams `json:"params"`
}

type pingAnswer struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Result  extension.InterceptResult `json:"result"`
}

// answerLines is the loop of the pipe peers, on one goroutine: it reads
// stdin a line at a time (a page's line of content-pipe, 349,528 bytes,
// fits its buffer), writes what answer makes of each to stdout, flushed
// after each line, and returns nil at EOF: the bench is done with the
// peer. An error ends the peer, and the bench reads EOF and reports the
// figure as failed.
func answerLines(answer func(line []byte, out *bufio.Writer) error) error {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadSlice('\n')
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = answer(line, out)
		}
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// answerPing is the pingpong peer's answer: the least a sidecar can do
// with an extension/intercept frame. It decodes the line with plain
// json.Unmarshal into the same DTOs the SDK decodes it into
// (extension.InterceptParams inside an envelope, then the payload into
// extension.ToolPayload, as the reference plugin's tool.before does),
// and answers continue with json.Marshal.
func answerPing(line []byte, out *bufio.Writer) error {
	var req pingRequest
	var tool extension.ToolPayload
	err := json.Unmarshal(line, &req)
	if err == nil {
		err = json.Unmarshal(req.Params.Payload, &tool)
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(pingAnswer{JSONRPC: "2.0", ID: req.ID, Result: extension.InterceptResult{Decision: extension.DecisionContinue}})
	out.Write(b)
	out.WriteByte('\n')
	return err
}

// echoLine is the echoline peer's answer: the least a process can do to
// be "ready", the line it read.
func echoLine(line []byte, out *bufio.Writer) error {
	_, err := out.Write(line)
	return err
}

// countEvents is the observer sidecar. Its tool.after observer only
// counts the events it receives, so the figure measures delivery, not
// work; its tool.before interceptor answers block with the reason
// "observed <n>", which is how the bench reads the count through the
// protocol itself.
func countEvents() error {
	// Events are observed on one goroutine while intercepts run on
	// others, hence the atomic.
	var count atomic.Int64
	return sdk.Serve(context.Background(), sdk.Options{
		Name:    cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), observerPeer),
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
}

// streamText is the text of every chunk the streamer and stream-pipe
// write.
const streamText = "a streamed piece of text "

// serveTexts is the streamer sidecar. It serves plugin/<id>/bench/text,
// whose stream is as many text chunks as the request's last message
// says, and answers input.receive continue once the SDK has read and
// verified its payload, however large.
func serveTexts() error {
	id := cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), streamerPeer)
	return sdk.Serve(context.Background(), sdk.Options{
		Name: id, Version: "1.0.0",
		Providers: []extension.ProviderDescriptor{{Ref: "plugin/" + id + "/bench/text", Model: "text"}},
		Provider:  texts{},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.InputReceive: func(context.Context, *sdk.Call) (sdk.Verdict, error) { return sdk.Continue(), nil },
		},
	})
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
			if !yield(sdk.Text(streamText)) {
				return
			}
		}
	}, nil
}

// chunkFrame is a stream chunk notification as the SDK writes it.
type chunkFrame struct {
	JSONRPC string                      `json:"jsonrpc"`
	Method  string                      `json:"method"`
	Params  extension.StreamChunkParams `json:"params"`
}

// pipeChunks is the stream-pipe peer's answer to a line "<count>
// <streamId>": that many of the streamer's chunk frames, as the SDK
// numbers them, through a buffered writer flushed when full and at the
// end.
func pipeChunks(line []byte, out *bufio.Writer) error {
	var n int64
	var id string
	if _, err := fmt.Sscan(string(line), &n, &id); err != nil {
		return err
	}
	f := chunkFrame{JSONRPC: "2.0", Method: extension.MethodStreamChunk, Params: extension.StreamChunkParams{StreamID: id, Chunk: sdk.Text(streamText)}}
	for seq := int64(1); seq <= n; seq++ {
		f.Params.Seq = seq
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	return nil
}

// hashContent is the content-pipe peer: it reads lines of base64 until
// an empty one, decodes and hashes them, and answers the hex SHA-256.
func hashContent() error {
	h := sha256.New()
	var buf []byte
	return answerLines(func(line []byte, out *bufio.Writer) error {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			fmt.Fprintln(out, hex.EncodeToString(h.Sum(nil)))
			h.Reset()
			return nil
		}
		var err error
		buf, err = base64.StdEncoding.AppendDecode(buf[:0], line)
		h.Write(buf)
		return err
	})
}
