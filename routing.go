package llmclient

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Routing orders the upstreams of a route for each call. Every strategy keeps the route's
// members; the strategies other than RouteOrdered also try first the upstreams that can
// serve now (breaker admitting, a key usable) and leave the others for last.
type Routing uint8

// The routing strategies.
const (
	// RouteDefault is the zero value: in CallOptions, the route's own strategy; in
	// WithRouting, RouteOrdered.
	RouteDefault Routing = iota
	// RouteOrdered tries the route in its order: the group's order, or registration
	// order. An unhealthy upstream is skipped as a local refusal.
	RouteOrdered
	// RouteWeighted starts each call on an upstream drawn in proportion to
	// Upstream.Weight (0 counts as 1), then the rest by weight.
	RouteWeighted
	// RouteLeastInFlight starts on the upstream with the fewest calls in flight.
	RouteLeastInFlight
	// RouteLatency starts on the upstream with the lowest moving average of latency (time
	// to first token for streams); one call in 200 starts on another upstream instead, so
	// that a recovered upstream is noticed.
	RouteLatency
	numRoutings
)

// Hedge configures hedged requests: when an attempt has not answered after Delay, the
// call also sends the request to the next upstream of its route, and the first attempt to
// answer wins (one-shot: a complete response; stream: its first content token). The other
// is canceled, waited for, and recorded as ClassCanceled; its limiter reservation is
// reconciled with the usage it reported, if any. When one of the two fails first, the
// call waits for the other, and goes on from it should it fail too — unless the failure's
// decision does not fail over (a bad request): the other is canceled and the call goes on
// from the failure, as without hedging.
//
// A hedge is an attempt like any other: it counts against the call's caps, is marked in
// the trace (Attempt.Hedge) and announced by EventHedge. It spends the retry budget of the
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
	// only for routes hedged by WithHedging without a Delay (or routed by RouteLatency), so
	// a CallOptions hedge without a Delay elsewhere waits 2s.
	Delay time.Duration
}

// WithRouting sets the routing strategy of the model group named group (WithModelGroup);
// the empty name sets it for every route without a strategy of its own, groups and models
// without a group alike. The strategy orders each call's route; it never adds upstreams to
// it or removes any. It needs no deadline. Default RouteOrdered.
func WithRouting(group string, r Routing) Option {
	return optionFunc(func(c *config) {
		if c.routing == nil {
			c.routing = map[string]Routing{}
		}
		c.routing[group] = r
	})
}

// WithHedging sets hedged requests (see Hedge) for the model group named group; the empty
// name sets them for every route without a setting of its own. Hedging needs another
// upstream in the route, and works with or without a deadline (a hedge that cannot start
// before the deadline is not started). Default off.
func WithHedging(group string, h Hedge) Option {
	return optionFunc(func(c *config) {
		if c.hedging == nil {
			c.hedging = map[string]Hedge{}
		}
		c.hedging[group] = h
	})
}

// validateRouting checks the routing and hedging options.
func (c *config) validateRouting() []error {
	var errs []error
	for g, r := range c.routing {
		if r >= numRoutings {
			errs = append(errs, fmt.Errorf("WithRouting(%q): unknown strategy %d", g, r))
		}
		if _, ok := c.groups[g]; g != "" && !ok {
			errs = append(errs, fmt.Errorf("WithRouting names unknown model group %q", g))
		}
	}
	for g, h := range c.hedging {
		if h.Delay < 0 {
			errs = append(errs, fmt.Errorf("WithHedging(%q): negative Delay %v", g, h.Delay))
		}
		if _, ok := c.groups[g]; g != "" && !ok {
			errs = append(errs, fmt.Errorf("WithHedging names unknown model group %q", g))
		}
	}
	for _, u := range c.upstreams {
		if u.Weight < 0 {
			errs = append(errs, fmt.Errorf("upstream %q: negative Weight %d", u.Name, u.Weight))
		}
	}
	return errs
}

// strategy is the routing strategy of a call for model (a group name or a model).
func (c *Client) strategy(model string, o *CallOptions) Routing {
	if o != nil && o.Routing != RouteDefault {
		return o.Routing
	}
	if len(c.cfg.routing) == 0 {
		return RouteOrdered
	}
	if s, ok := c.cfg.routing[model]; ok && model != "" {
		return s // New checked that every name set is a model group's
	}
	return c.cfg.routing[""]
}

// order returns route ordered by strategy s for one call at now, in buf when it fits: the
// healthy upstreams (breaker admitting, a key usable) first, in the strategy's order, then
// the others in the same order.
func (c *Client) order(route []*upstream, s Routing, stream bool, now time.Time, buf []*upstream) []*upstream {
	out := append(buf[:0], route...)
	switch s {
	case RouteWeighted:
		weightedOrder(out)
	case RouteLeastInFlight:
		sortBy(out, func(up *upstream) int64 { return int64(up.inFlight()) })
	case RouteLatency:
		sortBy(out, func(up *upstream) int64 {
			if stream {
				return int64(up.ttftStats.average())
			}
			return int64(up.latStats.average())
		})
		if len(out) > 1 && rand.IntN(exploreEvery) == 0 {
			// Exploration: now and then another upstream goes first, so that one that got
			// faster is noticed.
			i := 1 + rand.IntN(len(out)-1)
			out[0], out[i] = out[i], out[0]
		}
	}
	healthy := 0
	for i, up := range out {
		if up.healthy(now) {
			if i != healthy {
				copy(out[healthy+1:i+1], out[healthy:i]) // keep the order among the others
				out[healthy] = up
			}
			healthy++
		}
	}
	return out
}

// sortBy orders ups by key, smallest first, keeping the order of equal keys; each key is
// computed once. Routes are short: an insertion sort over keys on the stack.
func sortBy(ups []*upstream, key func(*upstream) int64) {
	var buf [8]int64
	keys := buf[:0]
	if len(ups) > len(buf) {
		keys = make([]int64, 0, len(ups))
	}
	for _, up := range ups {
		keys = append(keys, key(up))
	}
	for i := 1; i < len(ups); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
			ups[j], ups[j-1] = ups[j-1], ups[j]
		}
	}
}

// exploreEvery is how often, one call in so many, latency routing tries another upstream
// first: rarely enough to stay out of the 99th percentile, often enough that a recovered
// upstream is back within seconds under load.
const exploreEvery = 200

// maxWeight bounds Upstream.Weight, so that a route's total cannot overflow.
const maxWeight = 1 << 20

// weightOf is up's routing weight: Upstream.Weight within [1, maxWeight].
func weightOf(up *upstream) int { return min(max(up.Weight, 1), maxWeight) }

// weightedOrder orders ups as successive weighted draws without replacement: the first is
// drawn with probability weight/total (a weight of 0 counts as 1), the next among the rest
// in the same way, and so on; one random number per position.
func weightedOrder(ups []*upstream) {
	total := 0
	for _, up := range ups {
		total += weightOf(up)
	}
	for i := 0; i < len(ups)-1; i++ {
		x := rand.IntN(total)
		j := i
		for ; j < len(ups)-1; j++ {
			if x -= weightOf(ups[j]); x < 0 {
				break
			}
		}
		chosen := ups[j]
		total -= weightOf(chosen)
		if j != i {
			copy(ups[i+1:j+1], ups[i:j]) // the rest keep their order
			ups[i] = chosen
		}
	}
}
