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
	fw := newFrameWriter(&w)
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
