// Package routing names how a model group chooses among its upstreams (a [Policy],
// set with llmclient.WithRouting) and whether it hedges a slow call on a second
// upstream ([Hedge], set with llmclient.WithHedging).
package routing

import "time"

// Policy orders the upstreams of a route for each call. Every strategy keeps the route's
// members; the strategies other than Ordered also try first the upstreams that can
// serve now (breaker admitting, a key usable) and leave the others for last. A strategy
// ranks the upstream a call starts on when the call starts, and the rest of the route, by
// their statistics and health of then, when the call first moves on (a failover or a
// hedge).
type Policy uint8

// The routing strategies.
const (
	// Default is the zero value: in llmclient.CallOptions, the route's own strategy; in
	// llmclient.WithRouting, Ordered.
	Default Policy = iota
	// Ordered tries the route in its order: the group's order, or registration
	// order. An unhealthy upstream is skipped as a local refusal.
	Ordered
	// Weighted starts each call on an upstream drawn in proportion to
	// Upstream.Weight (0 counts as 1), then the rest by weight.
	Weighted
	// LeastInFlight starts on the upstream with the fewest calls in flight.
	LeastInFlight
	// Latency starts on the upstream with the lowest moving average of latency (time
	// to first token for streams); one call in 200 starts on another upstream instead,
	// drawn evenly, so that a recovered upstream is noticed: the call after every 200th
	// latency recorded on the upstream it would have started on.
	Latency
)

// Hedge configures hedged requests: when an attempt has not answered after Delay, the
// call also sends the request to the next upstream of its route, and the first attempt to
// answer wins (one-shot: a complete response; stream: its first content token). The other
// is canceled, waited for, and recorded as failure.Canceled; its limiter reservation is
// reconciled with the usage it reported, if any, and its upstream's breaker counts it slow
// when it had run longer than the slow-call threshold (breaker.Config.SlowCall,
// SlowFirstToken), else not at all. When one of the two fails first, the
// call waits for the other, and goes on from it should it fail too — unless the failure's
// decision does not fail over (a bad request): the other is canceled and the call goes on
// from the failure, as without hedging.
//
// A hedge is an attempt like any other: it counts against the call's caps, is marked in
// the trace (Attempt.Hedge) and announced by event.Hedge. It spends the retry budget of the
// upstream it hedges (it multiplies that upstream's calls, as a retry would), and it never
// waits: it is sent only when the next upstream's breaker admits, one of its keys is
// usable and its limiter admits at once. A call sends at most one hedge. Transport
// requests are not hedged. The zero Hedge is off.
type Hedge struct {
	// On enables hedging.
	On bool
	// Delay is how long to wait for an answer before hedging. 0 uses the hedged upstream's
	// observed 95th percentile of latency (time to first token for streams) over the last
	// 30 to 60 s, once it has seen 20 calls there, else 2s; the percentile is recorded
	// only for routes hedged by llmclient.WithHedging without a Delay (or routed by Latency), so
	// a llmclient.CallOptions hedge without a Delay elsewhere waits 2s.
	Delay time.Duration
}
