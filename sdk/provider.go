package sdk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/reasonix-ext/extension"
)

// Provider serves the models a sidecar declares in [Options.Providers]
// (PROTOCOL.md §5). Its methods are called concurrently.
type Provider interface {
	// Catalog answers extension/provider/catalog with the full
	// descriptors of the served models. They must carry no credential.
	Catalog(ctx context.Context) ([]extension.ProviderDescriptor, error)
	// Stream starts one stream for open. An error refuses it before
	// anything is sent: an *extension.Error travels as it is, any other
	// error is answered provider_failed and logged. Otherwise the host is
	// answered {"accepted":true} and the chunks are sent as chunks
	// yields them, numbered from max(open.SeqBase, 1), then the one
	// stream/end: a chunk of type error is not sent but ends the stream
	// with its message (build it with [ErrorChunk]); an invalid chunk
	// ends it with an error too. ctx ends when the host cancels the
	// stream, shuts the sidecar down or the connection ends: stop
	// yielding then, the stream ends interrupted and nothing more is
	// sent (at a shutdown, before it is answered, D30).
	Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error)
}

// invalidChunkText is the error of a stream/end after an invalid chunk
// (PROTOCOL.md §5.6).
const invalidChunkText = "the extension provider produced an invalid chunk"

// Text, Reasoning, ToolCallStart, ToolCallArgsDelta, ToolCall, Usage,
// Done and ErrorChunk build the eight chunk types (PROTOCOL.md §5.3).

// Text is a piece of assistant text.
func Text(text string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkText, Text: text}
}

// Reasoning is a piece of reasoning with its optional signature.
func Reasoning(text, signature string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkReasoning, Text: text, Signature: signature}
}

// ToolCallStart reports that the tool call id of name began.
func ToolCallStart(id, name string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCallStart, ToolCall: &extension.ProviderToolCall{ID: id, Name: name}}
}

// ToolCallArgsDelta reports that argChars characters of the call's
// arguments have arrived so far, in all.
func ToolCallArgsDelta(id, name string, argChars int64) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCallArgsDelta, ToolCall: &extension.ProviderToolCall{ID: id, Name: name}, ArgChars: argChars}
}

// ToolCall is one complete tool call; arguments is the JSON text of its
// arguments.
func ToolCall(call extension.ProviderToolCall) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCall, ToolCall: &call}
}

// Usage is the token accounting of the answer.
func Usage(u extension.ProviderUsage) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkUsage, Usage: &u}
}

// Done is the logical end of the assistant turn.
func Done() extension.ProviderChunk { return extension.ProviderChunk{Type: extension.ChunkDone} }

// ErrorChunk reports a provider failure with a generic message, which must
// hold no secret; blank means the frozen provider_failed text. Yielded
// from a stream it ends the stream with that message.
func ErrorChunk(message string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkError, Error: &extension.ProviderError{Code: extension.ProviderErrorFailed, Message: cmp.Or(message, providerFailedText)}}
}

// errServerBusy is the Conn's answer to a request past its MaxHandlers
// (PROTOCOL.md §2.5), which the package extension does not export: the
// SDK gives it to a stream/open past the bound on open streams.
var errServerBusy = &extension.Error{Code: -32099, Message: "server busy"}

// providerFailedText is the frozen message of provider_failed.
var providerFailedText = extension.NewError(extension.ReasonProviderFailed, "").Message

// catalog answers extension/provider/catalog (PROTOCOL.md §5.6).
func (s *server) catalog(ctx context.Context, _ *extension.ProviderCatalogParams) (any, error) {
	descs, err := s.opts.Provider.Catalog(ctx)
	if err != nil {
		return nil, s.providerError("Catalog", err)
	}
	return extension.ProviderCatalogResult{Providers: append([]extension.ProviderDescriptor{}, descs...)}, nil
}

// cancelStream answers extension/provider/stream/cancel.
func (s *server) cancelStream(ctx context.Context, p *extension.StreamCancelParams) (any, error) {
	s.streamsMu.Lock()
	cancel := s.streams[p.StreamID]
	s.streamsMu.Unlock()
	if cancel != nil {
		cancel()
	}
	return extension.StreamCancelResult{Cancelled: cancel != nil}, nil
}

// openStream answers extension/provider/stream/open, and has the chunks
// sent after the answer.
func (s *server) openStream(ctx context.Context, p *extension.StreamOpenParams) (any, error) {
	sctx, cancel := context.WithCancel(ctx) // ctx is the connection's: it ends with it
	var refused error
	s.streamsMu.Lock()
	switch {
	case s.stopping:
		refused = extension.NewError(extension.ReasonProviderInterrupted, "the sidecar is shutting down")
	case s.streams[p.StreamID] != nil:
		refused = extension.NewError(extension.ReasonProtocolError, fmt.Sprintf("stream %q is already open", p.StreamID))
	case len(s.streams) >= s.maxHandlers():
		// The streams' pumps are callbacks too: their number is bounded
		// like the handlers' (PROTOCOL.md §2.5).
		refused = errServerBusy
	default:
		s.streams[p.StreamID] = cancel
		s.pumps.Add(1) // under the lock: a shutdown waits for every stream it cancels (D30)
	}
	s.streamsMu.Unlock()
	if refused != nil {
		cancel()
		return nil, refused
	}
	chunks, err := s.opts.Provider.Stream(sctx, p)
	if err != nil {
		s.forget(p.StreamID, cancel)
		s.pumps.Done()
		return nil, s.providerError("Stream", err)
	}
	// The chunks follow the answer on the wire (PROTOCOL.md §5.6).
	return extension.AnswerThen{Result: extension.StreamOpenResult{Accepted: true}, Then: func() {
		go s.pump(sctx, cancel, p, chunks)
	}}, nil
}

// providerError is the answer to a Provider method that failed.
func (s *server) providerError(what string, err error) error {
	var e *extension.Error
	if errors.As(err, &e) {
		return e
	}
	s.logf("Provider.%s: %v", what, err)
	return extension.NewError(extension.ReasonProviderFailed, "")
}

// forget removes a stream from the table.
func (s *server) forget(id string, cancel context.CancelFunc) {
	cancel()
	s.streamsMu.Lock()
	delete(s.streams, id)
	s.streamsMu.Unlock()
}

// plain reports whether c, once encoded, is valid by construction: a text
// or reasoning chunk of strings alone, which encoding/json always writes
// validly.
func plain(c extension.ProviderChunk) bool {
	return (c.Type == extension.ChunkText || c.Type == extension.ChunkReasoning) && c.ToolCall == nil && c.Usage == nil && c.Error == nil && c.ArgChars >= 0
}

// chunkParams is the params of one extension/provider/stream/chunk, the
// chunk as encoded spliced in: the connection checks and sends it as it
// is.
func chunkParams(id []byte, seq int64, chunk []byte) json.RawMessage {
	b := append(append(make([]byte, 0, len(id)+len(chunk)+40), `{"streamId":`...), id...)
	b = strconv.AppendInt(append(b, `,"seq":`...), seq, 10)
	return append(append(append(b, `,"chunk":`...), chunk...), '}')
}

// pump sends one stream's chunks and its one stream/end (PROTOCOL.md §5.4,
// §5.6).
func (s *server) pump(ctx context.Context, cancel context.CancelFunc, p *extension.StreamOpenParams, chunks iter.Seq[extension.ProviderChunk]) {
	defer s.pumps.Done()
	conn := s.connection()
	s.running.Add(1)
	defer s.running.Add(-1)
	base := max(p.SeqBase, 1)
	id, _ := json.Marshal(p.StreamID) // a string: encoding cannot fail
	end := extension.StreamEndParams{StreamID: p.StreamID}
	var sent int64
	func() {
		defer func() {
			if v := recover(); v != nil {
				s.logf("Provider.Stream for %s panicked: %v", p.ProviderRef, v)
				end.Error = providerFailedText
			}
		}()
		if chunks == nil {
			return
		}
		for c := range chunks {
			if ctx.Err() != nil {
				return // cancelled: nothing more is sent
			}
			if base+sent < base { // a seqBase so large the seqs would wrap
				end.Error = invalidChunkText
				return
			}
			if c.Type == extension.ChunkError && c.Error != nil {
				end.Error = cmp.Or(c.Error.Message, providerFailedText)
				return
			}
			// The chunk is encoded once, and validated only when its
			// content can make it invalid (PROTOCOL.md §5.3).
			b, err := json.Marshal(c)
			if err == nil && !plain(c) {
				err = extension.Validate("ProviderChunk", b)
			}
			if err != nil {
				s.logf("Provider.Stream for %s produced an invalid chunk: %v", p.ProviderRef, err)
				end.Error = invalidChunkText
				return
			}
			if err := conn.Notify(ctx, extension.MethodStreamChunk, chunkParams(id, base+sent, b)); err != nil {
				if ctx.Err() == nil && conn.Err() == nil { // not sent: over the frame limit (D2)
					s.logf("Provider.Stream for %s: %v", p.ProviderRef, err)
					end.Error = invalidChunkText
				}
				return // else cancelled while waiting for room, or the connection ended
			}
			sent++
		}
	}()
	if sent > 0 {
		end.LastSeq = base + sent - 1
	}
	if ctx.Err() != nil {
		end.Error, end.Interrupted = "", true
	}
	// Out of the table before its end is sent: a host that has seen the
	// end may open another stream at once.
	s.forget(p.StreamID, cancel)
	if err := conn.Notify(context.Background(), extension.MethodStreamEnd, end); err != nil && conn.Err() == nil {
		s.logf("stream/end of %s: %v", p.StreamID, err)
	}
}
