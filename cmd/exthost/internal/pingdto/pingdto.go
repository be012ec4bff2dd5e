// Package pingdto holds the frames of exthost bench's ping-pong baseline,
// shared by the bench and its pingpong peer: an extension/intercept
// request and its answer, around the host's own DTOs.
package pingdto

import "github.com/reasonix-ext/extension"

// Request is the frame the bench writes.
type Request struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Method  string                    `json:"method"`
	Params  extension.InterceptParams `json:"params"`
}

// Answer is the frame the peer writes back.
type Answer struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Result  extension.InterceptResult `json:"result"`
}
