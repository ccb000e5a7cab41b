package fake

import (
	"maps"
	"slices"
	"time"

	"github.com/llmclient/llmclient"
)

// Record is one call a Provider received. Its embedded Call holds the Model, the APIKey
// (kept as given: these are the test's own keys) and a copy of the Request, so a request
// the caller reuses or changes later does not change the record.
type Record struct {
	llmclient.Call
	// Stream is true for a Provider.Stream call, false for Provider.Complete.
	Stream bool
	// Time is when the call arrived (virtual time inside a testing/synctest bubble).
	Time time.Time
	// Embed is a copy of the request of an Embed call (whose Call.Request is nil); nil for
	// Complete and Stream calls.
	Embed *llmclient.EmbedRequest
}

// newRecord records call, copying its request.
func newRecord(call *llmclient.Call, stream bool, now time.Time) Record {
	r := Record{Call: *call, Stream: stream, Time: now}
	r.Request = cloneRequest(call.Request)
	return r
}

// cloneRequest copies r with its slices, maps and pointed-to options, one level deep
// into messages; image bytes and Extra values are shared.
func cloneRequest(r *llmclient.Request) *llmclient.Request {
	if r == nil {
		return nil
	}
	c := *r
	c.Messages = slices.Clone(r.Messages)
	for i := range c.Messages {
		m := &c.Messages[i]
		m.Content = slices.Clone(m.Content)
		m.ToolCalls = slices.Clone(m.ToolCalls)
	}
	c.Tools = slices.Clone(r.Tools)
	for i := range c.Tools {
		c.Tools[i].Parameters = slices.Clone(c.Tools[i].Parameters)
	}
	if r.ToolChoice != nil {
		tc := *r.ToolChoice
		c.ToolChoice = &tc
	}
	if r.Temperature != nil {
		c.Temperature = llmclient.Float(*r.Temperature)
	}
	if r.TopP != nil {
		c.TopP = llmclient.Float(*r.TopP)
	}
	c.Stop = slices.Clone(r.Stop)
	if r.ResponseFormat != nil {
		rf := *r.ResponseFormat
		rf.Schema = slices.Clone(rf.Schema)
		c.ResponseFormat = &rf
	}
	c.Metadata = maps.Clone(r.Metadata)
	c.Extra = maps.Clone(r.Extra)
	return &c
}
