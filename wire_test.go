package extension

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/iotest"
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
	if !errors.As(err, &e) || e.Code != CodeDomain {
		t.Errorf("error: got %#v, want an *Error with code %d", err, CodeDomain)
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
	src := &endlessReader{remaining: input}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	fr := newFrameReader(src)
	_, err := fr.readFrame()

	runtime.ReadMemStats(&after)
	if !errors.Is(err, ReasonFrameTooLarge) {
		t.Fatalf("readFrame of a %d-byte line without newline: got %v, want reason frame_too_large", input, err)
	}
	if maxRead := FrameBytes + readBufferSize; src.consumed > maxRead {
		t.Errorf("bytes consumed before failing: got %d, want at most %d", src.consumed, maxRead)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated >= 2*FrameBytes {
		t.Errorf("bytes allocated while reading: got %d, want under %d", allocated, 2*FrameBytes)
	}
	if got := cap(fr.line); got > FrameBytes {
		t.Errorf("line buffer capacity: got %d, want at most %d", got, FrameBytes)
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
