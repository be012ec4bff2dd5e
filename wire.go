package extension

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Framing (D2, PROTOCOL.md §2.1): one JSON value per "\n"-terminated
// line. The reader below never holds more than the frame limit of one line
// in memory, plus its fixed read buffer; the writer below writes one
// pre-encoded frame at a time, in chunks, so that a watchdog can observe its
// byte progress.

// readBufferSize is the fixed buffer the frame reader reads through, and
// writeChunkSize the largest single Write the frame writer issues. Both are
// small next to [FrameBytes].
const (
	readBufferSize = 64 << 10
	writeChunkSize = 64 << 10
)

// frameReader reads NDJSON frames from an io.Reader. It is used by one
// goroutine at a time; consumed may be called from any.
type frameReader struct {
	br    *bufio.Reader
	in    *countingReader
	limit int // bytes a line may take including its "\n"

	// line accumulates a line longer than the read buffer. Its capacity
	// never exceeds limit; it is reused across frames unless it grew past
	// lineKeepBytes.
	line []byte
}

// lineKeepBytes is the largest line buffer kept between frames; a larger
// one, needed for one big frame, is released before the next read.
const lineKeepBytes = 1 << 20

func newFrameReader(r io.Reader) *frameReader {
	return newFrameReaderSize(r, FrameBytes, readBufferSize)
}

// newFrameReaderSize is newFrameReader with an explicit limit and read
// buffer size, for tests.
func newFrameReaderSize(r io.Reader, limit, bufSize int) *frameReader {
	in := &countingReader{r: r}
	return &frameReader{br: bufio.NewReaderSize(in, bufSize), in: in, limit: limit}
}

// countingReader counts the bytes read from r. beforeRead, when set, is
// called with the count before each Read of r.
type countingReader struct {
	r          io.Reader
	n          atomic.Int64
	beforeRead func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.beforeRead != nil {
		c.beforeRead(c.n.Load())
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// consumed returns how many bytes have been read from the input so far,
// the read buffer's included; frameEnd, on the reader's goroutine, the
// offset just past the last frame returned. The barrier compares them: a
// frame whose last byte was read before the host began to write
// extension/initialized is pre-barrier (D6).
func (fr *frameReader) consumed() int64 { return fr.in.n.Load() }

func (fr *frameReader) frameEnd() int64 { return fr.in.n.Load() - int64(fr.br.Buffered()) }

// readFrame returns the next non-empty frame: one line without its "\n",
// with a trailing "\r" and surrounding spaces and tabs removed. The frame
// may alias an internal buffer and is valid until the next call.
//
// D2: a line including its "\n" may take at most limit bytes. A final line
// that ends at EOF without "\n" is still returned, and is counted as if it
// had its "\n", so the same content is accepted with or without it. A longer
// line yields an *Error with reason frame_too_large as soon as the limit is
// passed: the rest of the line is not read, and the reader must not be used
// again. At the end of the input readFrame returns io.EOF; a read error is
// returned as is.
func (fr *frameReader) readFrame() ([]byte, error) {
	for {
		raw, err := fr.readLine()
		if err != nil {
			return nil, err
		}
		// D2: strip the "\r" of a CRLF line and surrounding blanks; skip
		// empty lines.
		frame := bytes.TrimLeft(bytes.TrimRight(raw, " \t\r"), " \t")
		if len(frame) > 0 {
			return frame, nil
		}
	}
}

// readLine returns one raw line without its "\n".
func (fr *frameReader) readLine() ([]byte, error) {
	if cap(fr.line) > lineKeepBytes {
		fr.line = nil
	}
	fr.line = fr.line[:0]
	for {
		chunk, err := fr.br.ReadSlice('\n')
		more := errors.Is(err, bufio.ErrBufferFull) // no "\n" yet: the line goes on
		if err != nil && err != io.EOF && !more {
			return nil, err
		}
		size := len(fr.line) + len(chunk)
		if err == io.EOF && size == 0 {
			return nil, io.EOF
		}
		if err == nil {
			chunk = chunk[:len(chunk)-1] // the "\n", counted in size
		} else {
			// A line with no "\n" yet needs at least one more byte; a
			// final line without "\n" counts as if it had one.
			size++
		}
		if size > fr.limit {
			return nil, NewError(ReasonFrameTooLarge, fmt.Sprintf("inbound frame exceeds %d bytes including its newline", fr.limit)) // terminal
		}
		if len(fr.line) == 0 && !more {
			return chunk, nil // aliases the read buffer
		}
		// The line buffer grows in steps of four, so that the buffers
		// allocated for one line add up to well under twice the limit, and
		// never to a capacity above the limit (size, checked above, is
		// need plus the "\n").
		if need := len(fr.line) + len(chunk); need > cap(fr.line) {
			c := min(max(4*cap(fr.line), need, fr.br.Size()), fr.limit)
			fr.line = append(make([]byte, 0, c), fr.line...)
		}
		fr.line = append(fr.line, chunk...)
		if !more {
			return fr.line, nil
		}
	}
}

// frameWriter writes pre-encoded frames, each already ending in "\n". It is
// used by exactly one goroutine, so frames never interleave (D2); the
// progress stamp is read by the write-stall watchdog from another.
type frameWriter struct {
	w     io.Writer
	epoch time.Time // monotonic origin of progress

	// progress is the time since epoch, in nanoseconds plus one, of the
	// last byte progress of the write in progress; 0 when no write is in
	// progress.
	progress atomic.Int64
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: w, epoch: time.Now()}
}

func (fw *frameWriter) stamp() { fw.progress.Store(int64(time.Since(fw.epoch)) + 1) }

// writeFrame writes frame completely, in chunks of at most writeChunkSize
// bytes, stamping the progress after each chunk.
func (fw *frameWriter) writeFrame(frame []byte) error {
	fw.stamp()
	defer fw.progress.Store(0)
	for len(frame) > 0 {
		n := min(len(frame), writeChunkSize)
		if _, err := fw.w.Write(frame[:n]); err != nil {
			return err
		}
		frame = frame[n:]
		fw.stamp()
	}
	return nil
}

// stalledFor returns how long the write in progress has made no byte
// progress, or 0 when no write is in progress.
func (fw *frameWriter) stalledFor() time.Duration {
	p := fw.progress.Load()
	if p == 0 {
		return 0
	}
	return time.Since(fw.epoch) - time.Duration(p-1)
}
