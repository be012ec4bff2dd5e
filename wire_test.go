package extension

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
)

// readAllFrames reads frames until an error and returns copies of them and
// the error that ended the reading.
func readAllFrames(fr *frameReader) ([]string, error) {
	var frames []string
	for {
		f, err := fr.readFrame()
		if err != nil {
			return frames, err
		}
		frames = append(frames, string(f))
	}
}

func TestReadFrameD2ExactLimitAccepted(t *testing.T) {
	content := bytes.Repeat([]byte{'x'}, FrameBytes-1)
	input := append(content, '\n')
	fr := newFrameReader(bytes.NewReader(input))

	got, err := fr.readFrame()
	if err != nil {
		t.Fatalf("readFrame of a %d-byte line including its newline: got error %v, want the frame", len(input), err)
	}
	if len(got) != FrameBytes-1 {
		t.Errorf("frame length: got %d, want %d", len(got), FrameBytes-1)
	}
	if _, err := fr.readFrame(); err != io.EOF {
		t.Errorf("second readFrame: got %v, want io.EOF", err)
	}
}

func TestReadFrameD2OneByteOverLimitFatal(t *testing.T) {
	input := append(bytes.Repeat([]byte{'x'}, FrameBytes), '\n')
	fr := newFrameReader(bytes.NewReader(input))

	got, err := fr.readFrame()
	if !errors.Is(err, ReasonFrameTooLarge) {
		t.Fatalf("readFrame of a %d-byte line: got (%d bytes, %v), want reason frame_too_large", len(input), len(got), err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != codeDomain {
		t.Errorf("error: got %#v, want an *Error with code %d", err, codeDomain)
	}
}

// endlessReader produces n bytes of 'x' without any newline and counts what
// has been read from it.
type endlessReader struct {
	remaining int
	consumed  int
}

func (r *endlessReader) Read(p []byte) (int, error) {
	if r.remaining == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.remaining)
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.remaining -= n
	r.consumed += n
	return n, nil
}

func TestReadFrameD2OversizeLineReadsAndHoldsAtMostTheLimit(t *testing.T) {
	const input = 64 << 20
	// Other goroutines of the test binary can only add to TotalAlloc, so
	// the smallest of three measurements is the reader's own.
	var allocated uint64 = math.MaxUint64
	for range 3 {
		src := &endlessReader{remaining: input}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)

		fr := newFrameReader(src)
		_, err := fr.readFrame()

		runtime.ReadMemStats(&after)
		allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
		if !errors.Is(err, ReasonFrameTooLarge) {
			t.Fatalf("readFrame of a %d-byte line without newline: got %v, want reason frame_too_large", input, err)
		}
		if maxRead := FrameBytes + readBufferSize; src.consumed > maxRead {
			t.Errorf("bytes consumed before failing: got %d, want at most %d", src.consumed, maxRead)
		}
		if got := cap(fr.line); got > FrameBytes {
			t.Errorf("line buffer capacity: got %d, want at most %d", got, FrameBytes)
		}
	}
	if allocated >= 2*FrameBytes {
		t.Errorf("bytes allocated while reading: got %d, want under %d", allocated, 2*FrameBytes)
	}
}

func TestReadFrameD2FinalFrameWithoutNewline(t *testing.T) {
	fr := newFrameReader(bytes.NewReader([]byte("{\"a\":1}\n{\"b\":2}")))
	got, err := readAllFrames(fr)
	want := []string{`{"a":1}`, `{"b":2}`}
	if err != io.EOF || !equalStrings(got, want) {
		t.Errorf("frames: got %q, %v; want %q, io.EOF", got, err, want)
	}
}

func TestReadFrameD2FinalFrameCountsItsMissingNewline(t *testing.T) {
	const limit = 32
	tests := []struct {
		name    string
		input   string
		wantErr bool
	}{
		{"limit-1 bytes at EOF", string(bytes.Repeat([]byte{'y'}, limit-1)), false},
		{"limit bytes at EOF", string(bytes.Repeat([]byte{'y'}, limit)), true},
		{"limit-1 bytes and newline", string(bytes.Repeat([]byte{'y'}, limit-1)) + "\n", false},
		{"limit bytes and newline", string(bytes.Repeat([]byte{'y'}, limit)) + "\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := newFrameReaderSize(bytes.NewReader([]byte(tt.input)), limit, 16)
			got, err := fr.readFrame()
			if tt.wantErr {
				if !errors.Is(err, ReasonFrameTooLarge) {
					t.Errorf("got (%q, %v), want reason frame_too_large", got, err)
				}
				return
			}
			if err != nil || len(got) != limit-1 {
				t.Errorf("got (%d bytes, %v), want %d bytes", len(got), err, limit-1)
			}
		})
	}
}

func TestReadFrameD2StripsCRAndBlanksAndSkipsEmptyLines(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"CRLF", "{}\r\n", []string{"{}"}},
		{"blanks around", " \t{} \t\n", []string{"{}"}},
		{"blanks and CR", "\t{}\t\r\n", []string{"{}"}},
		{"empty lines", "\n\n{}\n\n[]\n", []string{"{}", "[]"}},
		{"blank and CR only lines", " \n\r\n\t \r\n{}\n", []string{"{}"}},
		{"inner blanks kept", "{ \"a\" : 1 }\n", []string{`{ "a" : 1 }`}},
		{"only empty lines", "\n\r\n \n", nil},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAllFrames(newFrameReader(bytes.NewReader([]byte(tt.input))))
			if err != io.EOF || !equalStrings(got, tt.want) {
				t.Errorf("frames of %q: got %q, %v; want %q, io.EOF", tt.input, got, err, tt.want)
			}
		})
	}
}

func TestReadFrameLinesLongerThanTheReadBuffer(t *testing.T) {
	long := string(bytes.Repeat([]byte{'z'}, 3*readBufferSize+7))
	input := "{}\n" + long + "\r\n" + long
	got, err := readAllFrames(newFrameReader(iotest.HalfReader(bytes.NewReader([]byte(input)))))
	want := []string{"{}", long, long}
	if err != io.EOF || !equalStrings(got, want) {
		t.Errorf("got %d frames, %v; want %d frames matching the input, io.EOF", len(got), err, len(want))
	}
}

func TestReadFrameReturnsTheReadError(t *testing.T) {
	boom := errors.New("boom")
	fr := newFrameReader(io.MultiReader(bytes.NewReader([]byte("{}\n{")), iotest.ErrReader(boom)))
	got, err := readAllFrames(fr)
	if !errors.Is(err, boom) || !equalStrings(got, []string{"{}"}) {
		t.Errorf("got %q, %v; want [\"{}\"], %v", got, err, boom)
	}
}

// chunkRecorder records the size of every Write.
type chunkRecorder struct {
	bytes.Buffer
	sizes []int
}

func (w *chunkRecorder) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

func TestWriteFrameWritesWholeFramesInBoundedChunks(t *testing.T) {
	frame := append(bytes.Repeat([]byte{'w'}, 2*writeChunkSize+5), '\n')
	var w chunkRecorder
	fw := &frameWriter{w: &w, epoch: time.Now()}
	if err := fw.writeFrame(frame); err != nil {
		t.Fatalf("writeFrame: %v", err)
	}
	if !bytes.Equal(w.Bytes(), frame) {
		t.Errorf("written bytes differ from the frame (%d bytes written, want %d)", w.Len(), len(frame))
	}
	want := []int{writeChunkSize, writeChunkSize, 6}
	if len(w.sizes) != len(want) || w.sizes[0] != want[0] || w.sizes[1] != want[1] || w.sizes[2] != want[2] {
		t.Errorf("write sizes: got %v, want %v", w.sizes, want)
	}
	if d := fw.stalledFor(); d != 0 {
		t.Errorf("stalledFor after the write: got %v, want 0", d)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// modelFrames is the framing rule of D2 written as plainly as possible: the
// frames a reader with this limit returns, and whether it then fails with
// frame_too_large.
func modelFrames(data []byte, limit int) (frames []string, tooLarge bool) {
	for len(data) > 0 {
		line := data
		data = nil
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, data = line[:i], line[i+1:]
		}
		if len(line)+1 > limit { // a final line counts its missing newline
			return frames, true
		}
		if f := bytes.TrimLeft(bytes.TrimRight(line, " \t\r"), " \t"); len(f) > 0 {
			frames = append(frames, string(f))
		}
	}
	return frames, false
}

func FuzzReadFrame(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n",
		"{}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"extension/initialize\",\"params\":{}}\r\n",
		" \t{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\t \n\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
		"[1,2]\n\"x\"\n\xff\xfe\n",
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nshort\n",
		"\r\r\r\n \r \n",
	} {
		f.Add([]byte(seed))
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "frames", "*.ndjson"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("read seed %s: %v", p, err)
		}
		f.Add(data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, limit := range []int{17, 64, FrameBytes} {
			wantFrames, wantTooLarge := modelFrames(data, limit)
			readers := map[string]io.Reader{
				"whole":    bytes.NewReader(data),
				"one byte": iotest.OneByteReader(bytes.NewReader(data)),
			}
			for name, r := range readers {
				fr := newFrameReaderSize(r, limit, 16)
				var got []string
				var err error
				for {
					var frame []byte
					frame, err = fr.readFrame()
					if err != nil {
						break
					}
					if len(frame) == 0 || len(frame)+1 > limit {
						t.Fatalf("%s, limit %d: frame of %d bytes, want 1 to %d", name, limit, len(frame), limit-1)
					}
					if bytes.IndexByte(frame, '\n') >= 0 {
						t.Fatalf("%s, limit %d: frame %q contains a newline", name, limit, frame)
					}
					got = append(got, string(frame))
				}
				if gotTooLarge := errors.Is(err, ReasonFrameTooLarge); gotTooLarge != wantTooLarge || (!gotTooLarge && err != io.EOF) {
					t.Fatalf("%s, limit %d: reading ended with %v, want frame_too_large=%v", name, limit, err, wantTooLarge)
				}
				if !equalStrings(got, wantFrames) {
					t.Fatalf("%s, limit %d: frames %q, want %q", name, limit, got, wantFrames)
				}
			}
		}
	})
}

// The writer side of a Conn.

// blockingWriter blocks every Write until release is closed or the writer
// is closed; entered receives one value per Write that started.
type blockingWriter struct {
	entered   chan struct{}
	release   chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}, 1024), release: make(chan struct{}), closed: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	select {
	case <-w.release:
		return len(p), nil
	case <-w.closed:
		return 0, io.ErrClosedPipe
	}
}

func (w *blockingWriter) Close() error {
	w.closeOnce.Do(func() { close(w.closed) })
	return nil
}

// osPipes returns the ends of two os.Pipes: what a Conn reads and writes,
// and the peer's ends of each, so that every write is one write(2).
func osPipes(t *testing.T) (connR, connW, peerR, peerW *os.File) {
	t.Helper()
	connR, peerW, err := os.Pipe()
	if err == nil {
		peerR, connW, err = os.Pipe()
	}
	if err != nil {
		t.Fatal(err)
	}
	return connR, connW, peerR, peerW
}

func TestConnConcurrentCallsNeverInterleaveFrames(t *testing.T) {
	hangWatchdog(t)
	before := runtime.NumGoroutine()
	connR, connW, peerR, peerW := osPipes(t)
	c := NewConn(connR, connW, nil, ConnOptions{})

	const callers, callsEach = 100, 5
	// The peer checks that every line is one JSON request and echoes its
	// params.
	peerDone := make(chan error, 1)
	go func() {
		defer peerW.Close()
		in := bufio.NewReaderSize(peerR, 1<<20)
		seen := make(map[string]bool)
		for {
			line, err := in.ReadBytes('\n')
			if err == io.EOF && len(line) == 0 {
				peerDone <- nil
				return
			}
			if err != nil {
				peerDone <- fmt.Errorf("peer read: %v", err)
				return
			}
			f, err := parseOneFrame(line)
			if err == nil && (f.Method != "echo" || len(f.ID) == 0 || seen[string(f.ID)]) {
				err = fmt.Errorf("frame %.200q: want an echo request with a fresh id", line)
			}
			if err != nil {
				peerDone <- err
				return
			}
			seen[string(f.ID)] = true
			fmt.Fprintf(peerW, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", f.ID, f.Params)
		}
	}()

	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range callsEach {
				// Every seventh payload is larger than a write chunk,
				// so frames span several writes.
				size := 10 + g*i
				if (g+i)%7 == 0 {
					size = writeChunkSize + 1000*g
				}
				want := fmt.Sprintf(`{"caller":%d,"call":%d,"pad":%q}`, g, i, strings.Repeat("p", size))
				got, err := c.Call(context.Background(), "echo", json.RawMessage(want))
				if err != nil {
					t.Errorf("caller %d call %d: %v", g, i, err)
					return
				}
				if string(got) != want {
					t.Errorf("caller %d call %d: got a %d-byte result, want the %d-byte params back", g, i, len(got), len(want))
				}
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// Counted after Close, which joins the writer: a frame is counted once
	// its write returns, which can be after the peer has answered it.
	if got, want := c.stats().FramesOut, uint64(callers*callsEach); got != want {
		t.Errorf("FramesOut: got %d, want %d", got, want)
	}
	if err := <-peerDone; err != nil {
		t.Error(err)
	}
	peerR.Close()
	checkNoGoroutineLeft(t, before)
}

func TestConnWriteStallWatchdogFailsTheConnection(t *testing.T) {
	hangWatchdog(t)
	before := runtime.NumGoroutine()
	connR, connW, peerR, peerW := osPipes(t) // nobody reads peerR
	defer peerW.Close()
	defer peerR.Close()
	c := NewConn(connR, connW, nil, ConnOptions{WriteStallTimeout: 50 * time.Millisecond})

	// The frame is far larger than the pipe buffer, so the write blocks.
	_, err := c.Call(context.Background(), "big", map[string]string{"pad": strings.Repeat("s", 1<<20)})
	if !errors.Is(err, errWriteStall) {
		t.Errorf("pending Call: got %v, want errWriteStall", err)
	}
	<-c.Done()
	if err := c.Err(); !errors.Is(err, errWriteStall) {
		t.Errorf("Err: got %v, want errWriteStall", err)
	}
	c.Close()
	checkNoGoroutineLeft(t, before)
}

func TestConnCallCancelSkipsUnstartedFramesAndFinishesStartedOnes(t *testing.T) {
	hangWatchdog(t)
	synctest.Test(t, func(t *testing.T) {
		c, peer := newPipeConn(t, nil, ConnOptions{})

		// Call a: its frame spans several write chunks and the peer
		// reads only the first, so the writer is inside a's frame.
		ctxA, cancelA := context.WithCancel(context.Background())
		errA := make(chan error, 1)
		go func() {
			_, err := c.Call(ctxA, "a", map[string]string{"pad": strings.Repeat("a", 3*writeChunkSize)})
			errA <- err
		}()
		first := make([]byte, 10)
		if _, err := io.ReadFull(peer.in, first); err != nil {
			t.Fatal(err)
		}
		// Call b is queued behind a.
		ctxB, cancelB := context.WithCancel(context.Background())
		errB := make(chan error, 1)
		go func() {
			_, err := c.Call(ctxB, "b", nil)
			errB <- err
		}()
		synctest.Wait()
		if !c.isPending(1) || !c.isPending(2) {
			t.Fatalf("isPending(1), isPending(2): got %v, %v; want both true", c.isPending(1), c.isPending(2))
		}
		cancelA()
		cancelB()
		if err := <-errA; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call a: got %v, want context.Canceled", err)
		}
		if err := <-errB; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call b: got %v, want context.Canceled", err)
		}
		if c.isPending(1) || c.isPending(2) {
			t.Error("cancelled calls are still pending")
		}
		if err := c.Notify(context.Background(), "c", nil); err != nil {
			t.Fatal(err)
		}

		rest, err := peer.in.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if f, err := parseOneFrame(append(first, rest...)); err != nil || f.Method != "a" {
			t.Errorf("started frame: got method %q, %v; want the complete frame of a", f.Method, err)
		}
		if f := peer.recv(t); f.Method != "c" {
			t.Errorf("frame after a: got method %q, want c (b was skipped)", f.Method)
		}
	})
}

func TestConnTryNotifyPastEventBudgetReturnsErrQueueFullAtOnce(t *testing.T) {
	hangWatchdog(t)
	synctest.Test(t, func(t *testing.T) {
		connR, peerW := io.Pipe()
		w := newBlockingWriter()
		c := NewConn(connR, w, nil, ConnOptions{})
		defer peerW.Close()
		defer c.Close()

		for i := range 16 {
			if err := c.tryNotify("event", map[string]int{"i": i}); err != nil {
				t.Fatalf("TryNotify %d within the budget: %v", i, err)
			}
		}
		start := time.Now()
		err := c.tryNotify("event", map[string]int{"i": 16})
		if !errors.Is(err, errQueueFull) {
			t.Errorf("17th TryNotify: got %v, want errQueueFull", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("17th TryNotify took %v of bubble time, want 0 (it must not block)", d)
		}
		if got := c.stats().DroppedEvents; got != 1 {
			t.Errorf("DroppedEvents: got %d, want 1", got)
		}

		// Once the writer has written the events, the budget is free.
		close(w.release)
		synctest.Wait()
		if got := c.stats().FramesOut; got != 16 {
			t.Errorf("FramesOut: got %d, want 16", got)
		}
		if err := c.tryNotify("event", nil); err != nil {
			t.Errorf("TryNotify after the queue drained: %v", err)
		}
	})
}

func TestConnNotifyBlocksOnAFullQueueUntilContextDone(t *testing.T) {
	hangWatchdog(t)
	synctest.Test(t, func(t *testing.T) {
		connR, peerW := io.Pipe()
		w := newBlockingWriter()
		c := NewConn(connR, w, nil, ConnOptions{WriteQueue: 1})
		defer peerW.Close()
		defer c.Close()

		if err := c.Notify(context.Background(), "n1", nil); err != nil {
			t.Fatal(err)
		}
		<-w.entered // the writer holds n1
		if err := c.Notify(context.Background(), "n2", nil); err != nil {
			t.Fatal(err) // n2 fills the queue
		}
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error, 1)
		go func() { result <- c.Notify(ctx, "n3", nil) }()
		synctest.Wait()
		select {
		case err := <-result:
			t.Fatalf("Notify on a full queue returned %v, want it to block", err)
		default:
		}
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Errorf("Notify after cancel: got %v, want context.Canceled", err)
		}
	})
}

// TestWriteStallFiresWithinTenPercentOfItsBoundD13: the watchdog declares
// a stall no later than its bound plus 10% (it looks every twentieth of
// it), on synctest's fake clock, so the figure is exact and the run
// takes no real time. A 10 s bound once fired at 14.9 s.
func TestWriteStallFiresWithinTenPercentOfItsBoundD13(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 10 * time.Second
		c, _ := newPipeConn(t, nil, ConnOptions{WriteStallTimeout: bound}) // the peer never reads
		start := time.Now()
		go c.Notify(context.Background(), "stuck", nil) // io.Pipe: the write waits for a reader
		<-c.Done()
		if took := time.Since(start); !errors.Is(c.Err(), errWriteStall) || took < bound || took > bound+bound/10 {
			t.Fatalf("after %v: Err = %v, want errWriteStall between %v and %v", took, c.Err(), bound, bound+bound/10)
		}
	})
}

// frameCase is one adversarial frame and the outcome v1 prescribes for it
// (D2-D5, PROTOCOL.md §2.4).
type frameCase struct {
	name  string
	frame string // one line, without its "\n"

	// The answer, when there is one: code and reason of the error, and the
	// id it echoes (echo false: id null). reply "" means no answer at all;
	// "result" means a successful answer from the handler.
	reply  string // "", "error", "result"
	code   int
	reason Reason
	echo   bool
	id     msgID

	dropped bool // rejected by the envelope rules but never answered

	// Every frame of the table keeps the connection: the only frame that
	// ends it, one longer than FrameBytes, has its own tests in
	// conn_test.go.
}

const shutdownParams = `"params":{"timeoutMillis":5}`

func req(id, rest string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"extension/shutdown",` + rest + `}`
}

// adversarialFrames are the frames of issue 2's acceptance 3 and more.
// Frames that need the reader (the 8 MiB boundary) are in the Conn-level
// table of conn_test.go.
func adversarialFrames() []frameCase {
	invalid := func(name, frame string) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeInvalidRequest, reason: ReasonProtocolError}
	}
	invalidEcho := func(name, frame string, id msgID) frameCase {
		c := invalid(name, frame)
		c.echo, c.id = true, id
		return c
	}
	parse := func(name, frame string) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeParseError, reason: ReasonProtocolError}
	}
	badParams := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeInvalidParams, reason: ReasonInvalidParams, echo: true, id: id}
	}
	// dropped: a malformed response is never answered (PROTOCOL.md §2.4).
	dropped := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, dropped: true, code: codeInvalidRequest, reason: ReasonProtocolError, echo: id != 0, id: id}
	}
	ok := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, reply: "result", echo: true, id: id}
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	return []frameCase{
		ok("valid request", req("1", shutdownParams), 1),
		ok("unknown envelope members tolerated", `{"jsonrpc":"2.0","id":2,"x-trace":"t","method":"extension/shutdown",`+shutdownParams+`}`, 2),
		ok("escaped member name counts by its decoded value", `{"jsonrpc":"2.0","id":3,"\u006dethod":"extension/shutdown",`+shutdownParams+`}`, 3),
		ok("leading and trailing blanks", "  \t"+req("4", shutdownParams)+" \t", 4),
		ok("trailing carriage return", req("5", shutdownParams)+"\r", 5),
		ok("negative id fits int64", req("-7", shutdownParams), -7),
		ok("largest int64 id", req("9223372036854775807", shutdownParams), 9223372036854775807),
		ok("smallest int64 id", req("-9223372036854775808", shutdownParams), -9223372036854775808),
		ok("members in any order", `{`+shutdownParams+`,"method":"extension/shutdown","id":8,"jsonrpc":"2.0"}`, 8),

		// D2: invalid UTF-8 is a protocol_error for that frame.
		invalid("invalid UTF-8 in a string", req("9", `"params":{"timeoutMillis":5,"x":"`+"\xff\xfe"+`"}`)),
		invalid("overlong UTF-8 encoding", `{"jsonrpc":"2.0","id":10,"method":"`+"\xc0\xaf"+`"}`),
		invalid("invalid UTF-8 outside strings", "\xff"),

		// D3: duplicates, and only the exact member names count.
		invalid("duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"extension/shutdown",`+shutdownParams+`}`),
		invalid("duplicate method", `{"jsonrpc":"2.0","id":1,"method":"extension/shutdown","method":"extension/intercept",`+shutdownParams+`}`),
		invalid("duplicate unknown member", `{"jsonrpc":"2.0","id":1,"x":1,"x":2,"method":"extension/shutdown",`+shutdownParams+`}`),
		invalid("duplicate through an escape", `{"jsonrpc":"2.0","\u0069d":1,"id":2,"method":"extension/shutdown"}`),
		badParams("duplicate key inside params", req("11", `"params":{"timeoutMillis":5,"timeoutMillis":6}`), 11),
		badParams(`"DECISION" beside "decision" in params`, `{"jsonrpc":"2.0","id":12,"method":"extension/intercept","params":{"event":"tool.before","EVENT":"input.receive","seq":1,"payload":{},"timeoutMillis":0}}`, 12),
		badParams(`"paramſ" is not params (D5: absent params read as {})`, `{"jsonrpc":"2.0","id":13,"method":"extension/shutdown","paramſ":{"timeoutMillis":5}}`, 13),
		badParams(`"Params" is not params`, `{"jsonrpc":"2.0","id":14,"method":"extension/shutdown","Params":{"timeoutMillis":5}}`, 14),
		{name: `"ID" is not id: the frame is a notification`, frame: `{"jsonrpc":"2.0","ID":15,"method":"extension/initialized","params":{}}`},
		dropped(`"ID" without method is a response without id`, `{"jsonrpc":"2.0","ID":15,"result":{}}`, 0),
		dropped("response with a string id", `{"jsonrpc":"2.0","id":"7","result":{}}`, 0),
		dropped("error response with a null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`, 0),
		dropped(`"Method" is not method: an id without method is a response`, `{"jsonrpc":"2.0","id":16,"Method":"extension/shutdown"}`, 16),
		invalid(`"JSONRPC" is not jsonrpc`, `{"JSONRPC":"2.0","method":"extension/initialized"}`),

		// D4: ids.
		invalid("string id", req(`"1"`, shutdownParams)),
		invalid("null id", req("null", shutdownParams)),
		invalid("fractional id", req("1.5", shutdownParams)),
		invalid("integral fraction id", req("1.0", shutdownParams)),
		invalid("exponent id", req("1e2", shutdownParams)),
		invalid("negative zero id", req("-0", shutdownParams)),
		invalid("30-digit id", req("123456789012345678901234567890", shutdownParams)),
		invalid("id just past int64", req("9223372036854775808", shutdownParams)),
		invalid("boolean id", req("true", shutdownParams)),
		invalid("object id", req(`{"n":1}`, shutdownParams)),
		invalid("array id", req("[1]", shutdownParams)),
		invalid("1 MB number literal as id", req(strings.Repeat("7", 1<<20), shutdownParams)),
		parse("leading-zero id is not JSON", req("01", shutdownParams)),

		// D5: params.
		invalidEcho("array params", req("17", `"params":[5]`), 17),
		invalidEcho("string params", req("18", `"params":"x"`), 18),
		invalidEcho("null params", req("19", `"params":null`), 19),
		invalidEcho("number params", req("20", `"params":5`), 20),
		badParams("absent params read as {}", `{"jsonrpc":"2.0","id":21,"method":"extension/shutdown"}`, 21),
		badParams("1 MB number literal in params", req("22", `"params":{"timeoutMillis":`+strings.Repeat("9", 1<<20)+`}`), 22),
		badParams("fraction in an integer param", req("23", `"params":{"timeoutMillis":5.0}`), 23),
		badParams("null for a param", req("24", `"params":{"timeoutMillis":null}`), 24),
		badParams("unknown param", req("25", `"params":{"timeoutMillis":5,"force":true}`), 25),

		// Shapes that are not one JSON object.
		invalid("batch array", `[`+req("1", shutdownParams)+`]`),
		invalid("empty batch", `[]`),
		invalid("bare number", `42`),
		invalid("bare string", `"extension/shutdown"`),
		invalid("bare true", `true`),
		invalid("bare null", `null`),
		parse("trailing object after the object", req("26", shutdownParams)+` {}`),
		parse("trailing garbage after the object", req("27", shutdownParams)+`x`),
		parse("byte order mark", "\xef\xbb\xbf"+req("28", shutdownParams)),
		parse("unterminated object", `{"jsonrpc":"2.0","id":29`),
		parse("trailing comma", `{"jsonrpc":"2.0","id":30,}`),
		parse("unterminated string", `{"jsonrpc":"2.0","method":"ext`),
		parse("raw control character in a string", "{\"jsonrpc\":\"2.0\",\"method\":\"a\x01\"}"),
		parse("bad escape", `{"jsonrpc":"2.0","method":"a\x"}`),
		parse("NUL byte", "{\x00}"),
		parse("single quotes", `{'jsonrpc':'2.0'}`),
		parse("100,000 levels of nesting", `{"jsonrpc":"2.0","id":31,"method":"extension/shutdown","params":{"x":`+deep+`}}`),

		// The jsonrpc member.
		invalidEcho("missing jsonrpc", `{"id":32,"method":"extension/shutdown",`+shutdownParams+`}`, 32),
		invalidEcho(`"jsonrpc":"1.0"`, `{"jsonrpc":"1.0","id":33,"method":"extension/shutdown",`+shutdownParams+`}`, 33),
		invalidEcho(`"jsonrpc":2.0 as a number`, `{"jsonrpc":2.0,"id":34,"method":"extension/shutdown",`+shutdownParams+`}`, 34),
		invalidEcho(`"jsonrpc":"2.0 " with a space`, `{"jsonrpc":"2.0 ","id":35,"method":"extension/shutdown",`+shutdownParams+`}`, 35),

		// Requests and responses that mix their members.
		dropped("response with both result and error", `{"jsonrpc":"2.0","id":36,"result":{},"error":{"code":-32603,"message":"m"}}`, 36),
		dropped("response with neither result nor error", `{"jsonrpc":"2.0","id":37}`, 37),
		dropped("an invalid id alone is response-shaped", `{"jsonrpc":"2.0","id":"37"}`, 0),
		dropped("a null id alone is response-shaped", `{"jsonrpc":"2.0","id":null}`, 0),
		dropped("response with params", `{"jsonrpc":"2.0","id":38,"result":{},"params":{}}`, 38),
		invalidEcho("request with result", `{"jsonrpc":"2.0","id":39,"method":"extension/shutdown","result":{}}`, 39),
		invalidEcho("request with error", `{"jsonrpc":"2.0","id":40,"method":"extension/shutdown","error":{"code":1,"message":"m"}}`, 40),
		invalidEcho("empty method", `{"jsonrpc":"2.0","id":41,"method":""}`, 41),
		invalidEcho("numeric method", `{"jsonrpc":"2.0","id":42,"method":7}`, 42),
		dropped("error without code", `{"jsonrpc":"2.0","id":43,"error":{"message":"m"}}`, 43),
		dropped("error with a string code", `{"jsonrpc":"2.0","id":44,"error":{"code":"-32000","message":"m"}}`, 44),
		dropped("error that is not an object", `{"jsonrpc":"2.0","id":45,"error":"boom"}`, 45),
		invalid("neither method nor id", `{"jsonrpc":"2.0","params":{}}`),
		invalid("empty object", `{}`),

		// Unknown methods and stray traffic.
		{name: "unknown method", frame: `{"jsonrpc":"2.0","id":46,"method":"extension/bogus","params":{}}`, reply: "error", code: codeMethodNotFound, reason: ReasonUnknownMethod, echo: true, id: 46},
		{name: "unknown notification is dropped", frame: `{"jsonrpc":"2.0","method":"extension/bogus","params":{}}`},
		{name: "response to an unknown id is dropped (D4)", frame: `{"jsonrpc":"2.0","id":999,"result":{}}`},
		{name: "error response to an unknown id is dropped", frame: `{"jsonrpc":"2.0","id":998,"error":{"code":-32000,"message":"m","data":{"reason":"internal","retryable":true}}}`},
	}
}

func TestAdversarialFrameTableIsLargeEnough(t *testing.T) {
	if n := len(adversarialFrames()); n < 60 {
		t.Fatalf("%d adversarial frames, want at least 60", n)
	}
}

// TestDecodeMessageAdversarialFrames checks the envelope-level half of each
// outcome: the code, reason and echoed id of every frame decodeMessage
// itself must reject.
func TestDecodeMessageAdversarialFrames(t *testing.T) {
	for _, c := range adversarialFrames() {
		t.Run(c.name, func(t *testing.T) {
			m, fe := decodeMessage([]byte(strings.TrimRight(strings.Trim(c.frame, " \t"), "\r")))
			envelopeError := c.dropped || c.reply == "error" && (c.code == codeInvalidRequest || c.code == codeParseError)
			if !envelopeError {
				if fe != nil {
					t.Fatalf("decodeMessage rejected a frame the envelope admits: %v", fe)
				}
				if c.echo && m.id != c.id {
					t.Fatalf("decoded id %d, want %d", m.id, c.id)
				}
				return
			}
			if fe == nil {
				t.Fatalf("decodeMessage accepted %.80q as %v", c.frame, m.kind)
			}
			if fe.err.Code != c.code || fe.err.Reason != c.reason {
				t.Fatalf("got code %d reason %s (%v), want code %d reason %s", fe.err.Code, fe.err.Reason, fe.err, c.code, c.reason)
			}
			if c.dropped != (fe.kind == kindResponse) {
				t.Fatalf("response-shaped %v, want %v", fe.kind == kindResponse, c.dropped)
			}
			if fe.hasID != c.echo || (c.echo && fe.id != c.id) {
				t.Fatalf("got id echo %v %d, want %v %d", fe.hasID, fe.id, c.echo, c.id)
			}
		})
	}
}

// TestInterceptRequestEncodedByHandMatchesEncodingJSON: the hand encoder of
// the host's most frequent frame writes exactly what encoding/json writes,
// payload compaction included, and refuses what it refuses.
func TestInterceptRequestEncodedByHandMatchesEncodingJSON(t *testing.T) {
	payloads := []string{`{}`, `{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}`, "{\n  \"a\" : [1, 2,\t{\"b\":null}],\r\n \"c\":\"<&>\u2028é\"\n}", ``, `null`}
	for i, raw := range payloads {
		p := InterceptParams{Event: ToolBefore, Seq: int64(i + 1), Payload: json.RawMessage(raw), TimeoutMillis: 5000}
		if raw == "" {
			p.Payload = nil
		}
		id := msgID(9_000_000_000 + i)
		got, err := encodeRequest(&id, MethodIntercept, p)
		if err != nil {
			t.Fatalf("payload %q: %v", raw, err)
		}
		want, err := encodeFrame(requestFrame{JSONRPC: "2.0", ID: &id, Method: MethodIntercept, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("payload %q:\n got %s\nwant %s", raw, got, want)
		}
	}
	id := msgID(1)
	for _, raw := range []string{`{"a":`, ``} {
		bad := InterceptParams{Event: ToolBefore, Seq: 1, Payload: json.RawMessage(raw)}
		if _, err := encodeRequest(&id, MethodIntercept, bad); err == nil {
			t.Errorf("payload %q, which encoding/json refuses, was encoded", raw)
		}
	}
}

// TestEncodeRequestSplicesEncodedParams: params the caller encoded are
// sent as they are, byte for byte what encoding the struct gives, once the
// strict walk's syntax pass accepts them; what is not one JSON object is
// refused (D5), and a method outside the registry is encoded as usual.
func TestEncodeRequestSplicesEncodedParams(t *testing.T) {
	p := StreamChunkParams{StreamID: "es_0123456789abcdef01234567", Seq: 7, Chunk: ProviderChunk{Type: ChunkText, Text: "\"q\" \u00e9\t"}}
	want, err := encodeRequest(nil, MethodStreamChunk, p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	got, err := encodeRequest(nil, MethodStreamChunk, json.RawMessage(raw))
	if err != nil || string(got) != string(want) {
		t.Fatalf("spliced %s, %v; want %s", got, err, want)
	}
	spaced, err := encodeRequest(nil, MethodStreamChunk, json.RawMessage(" { \"a\" : [1, 2] } "))
	if err != nil || string(spaced) != `{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"a":[1,2]}}`+"\n" {
		t.Errorf("spaced params: %s, %v; want them compacted", spaced, err)
	}
	id := msgID(3)
	if got, err := encodeRequest(&id, MethodIntercept, json.RawMessage(`{}`)); err != nil || string(got) != `{"jsonrpc":"2.0","id":3,"method":"extension/intercept","params":{}}`+"\n" {
		t.Errorf("request: %s, %v", got, err)
	}
	for _, bad := range []string{`[1]`, `{"a":`, `"s"`, `{"a":1}x`} {
		if got, err := encodeRequest(nil, MethodStreamChunk, json.RawMessage(bad)); err == nil {
			t.Errorf("params %s were sent as %s; want them refused", bad, got)
		}
	}
	if got, err := encodeRequest(nil, "x/\"odd\"", json.RawMessage(`{}`)); err != nil || !json.Valid(got) {
		t.Errorf("a method outside the registry: %s, %v; want it encoded as usual", got, err)
	}
}

// TestEncodeResultWritesAPreEncodedResultsHeadIntoItsRoom: a result this
// package encoded itself (a content page, D22) becomes its response frame
// in place, the head written into the room before it: byte for byte what
// encoding the frame gives, for every id up to the longest.
func TestEncodeResultWritesAPreEncodedResultsHeadIntoItsRoom(t *testing.T) {
	const result = `{"contentRef":"c","offset":0}`
	for _, id := range []msgID{1, 42, math.MaxInt64, math.MinInt64} {
		raw := append(make(preEncoded, preHead, preHead+len(result)+2), result...)
		got, err := encodeResult(id, raw)
		want, _ := encodeFrame(responseFrame{JSONRPC: "2.0", ID: &id, Result: json.RawMessage(result)})
		if err != nil || string(got) != string(want) {
			t.Errorf("id %d: %s, %v; want %s", id, got, err, want)
		}
		if &got[len(got)-len(result)-2] != &raw[preHead] {
			t.Errorf("id %d: the result was copied into a new frame", id)
		}
	}
}
