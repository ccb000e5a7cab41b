package adapter

import (
	"bytes"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/llmclient/llmclient"
)

// MaxSkippedEvents is the number of malformed events a healthy stream may skip; the next
// one fails it.
const MaxSkippedEvents = 8

// Skips decides, for a stream decoder, whether a malformed event is skipped (a proxy or
// CDN rewrote it) or fails the stream, and counts the skipped ones. A malformed event is
// skipped only once the stream decoded a good event (Good), and at most MaxSkippedEvents
// times per stream. The zero value is ready to use.
//
// Good and Skip are called by the stream's Recv, which is not concurrent with itself;
// Count is safe for concurrent use.
type Skips struct {
	healthy bool
	n       atomic.Int32
}

// Good records that the stream decoded a good event: later malformed events may be
// skipped.
func (k *Skips) Good() { k.healthy = true }

// Skip reports whether a malformed event may be skipped, and counts it when so: the
// stream is healthy and fewer than MaxSkippedEvents were skipped.
func (k *Skips) Skip() bool {
	if !k.healthy || k.n.Load() >= MaxSkippedEvents {
		return false
	}
	k.n.Add(1)
	return true
}

// Count returns the number of malformed events skipped so far. It is safe for concurrent
// use.
func (k *Skips) Count() int { return int(k.n.Load()) }

// Note adds the number of skipped events, when there were some, to the message of err
// when err is an *llmclient.Error: " (after N malformed events skipped)". It returns err.
func (k *Skips) Note(err error) error {
	var e *llmclient.Error
	if n := k.Count(); n > 0 && errors.As(err, &e) {
		e.Message += " (after " + strconv.Itoa(n) + " malformed events skipped)"
	}
	return err
}

// StartsObject reports whether data, after leading white space, starts as a JSON object:
// what a rewritten event looks like, as opposed to a body of another kind.
func StartsObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}
