package llmclient

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/llmclient/llmclient/routing"
)

// WithRouting sets the routing strategy of the model group named group (WithModelGroup);
// the empty name sets it for every route without a strategy of its own, groups and models
// without a group alike. The strategy orders each call's route; it never adds upstreams to
// it or removes any. It needs no deadline. Default routing.Ordered.
func WithRouting(group string, r routing.Policy) Option {
	return optionFunc(func(c *config) {
		if c.routing == nil {
			c.routing = map[string]routing.Policy{}
		}
		c.routing[group] = r
	})
}

// WithHedging sets hedged requests (see Hedge) for the model group named group; the empty
// name sets them for every route without a setting of its own. Hedging needs another
// upstream in the route, and works with or without a deadline (a hedge that cannot start
// before the deadline is not started). Default off.
func WithHedging(group string, h routing.Hedge) Option {
	return optionFunc(func(c *config) {
		if c.hedging == nil {
			c.hedging = map[string]routing.Hedge{}
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
	return errs
}

// routePolicy is how a route's calls are ordered and hedged. It is resolved once per
// route, by New and, for a model group, again whenever Client.Update rebuilds the groups,
// and it travels with the route, so that a call does not look its strategy up. It is not
// changed once built.
type routePolicy struct {
	routing routing.Policy // never routing.Default
	hedge   routing.Hedge
}

// groupRoute is a model group's chain, its fallback groups' members included, with its
// policy.
type groupRoute struct {
	ups    []*upstream
	policy routePolicy
}

// policyFor resolves the policy of the model group named group, "" for the routes of
// models without a group: the group's own WithRouting and WithHedging, else those set
// for "".
func (c *config) policyFor(group string) routePolicy {
	s, ok := c.routing[group]
	if !ok {
		s = c.routing[""]
	}
	if s == routing.Default {
		s = routing.Ordered
	}
	h, ok := c.hedging[group]
	if !ok {
		h = c.hedging[""]
	}
	return routePolicy{routing: s, hedge: h}
}

// strategy is the routing strategy of a call under p with the call's options o (nil for
// none).
func (p *routePolicy) strategy(o *CallOptions) routing.Policy {
	if o != nil && o.Routing != routing.Default {
		return o.Routing
	}
	return p.routing
}

// hedging is the hedging of a call under p with the call's options o (nil for none).
func (p *routePolicy) hedging(o *CallOptions) routing.Hedge {
	if o != nil && o.Hedge != nil {
		return *o.Hedge
	}
	return p.hedge
}

// policyOf is the policy of the route of model (a group name or a model), for the calls
// whose route was built without one (transport requests, embedding batches).
func (c *Client) policyOf(model string) *routePolicy {
	if g := (*c.groups.Load())[model]; g != nil {
		return &g.policy
	}
	return &c.basePolicy
}

// strategy is the routing strategy of a call for model (a group name or a model).
func (c *Client) strategy(model string, o *CallOptions) routing.Policy {
	return c.policyOf(model).strategy(o)
}

// order orders the run's route, of at least two upstreams, by strategy s for one call at
// r.start. The call starts on the strategy's pick when that upstream can serve now
// (breaker admitting, a key usable): the one drawn by weight, the one with the fewest
// calls in flight, or the one with the lowest moving average of latency (time to first
// token for a stream) but, after every exploreEvery latencies recorded on that one,
// another drawn evenly; ties go to the earlier upstream. The others stay in the route's
// order for now, and orderRest orders them, by the same strategy and then health, when
// the call first needs them (its first failure, or a hedge), with the statistics and
// health of then. A call that its first upstream serves thus ranks the route once and
// checks one upstream's health, and its route stays the shared one when the pick is its
// head.
//
// When the pick cannot serve, the route is ordered at once: the pick, then the others by
// the strategy, and the upstreams that can serve now moved ahead of those that cannot,
// each side keeping that order.
func (r *run) order(s routing.Policy, stream bool) {
	route := r.route
	b := 0 // the pick; computed here rather than in a function: this is the hot path
	switch s {
	case routing.Weighted:
		var total uint64
		for _, up := range route {
			total += weightOf(up)
		}
		x, _ := bits.Mul64(rand.Uint64(), total) // uniform in [0, total)
		b = weightedPick(route, x)
	case routing.LeastInFlight:
		least := int32(math.MaxInt32)
		for i, up := range route {
			if n := up.inFlight(); n < least {
				b, least = i, n
			}
		}
	case routing.Latency:
		lowest := time.Duration(math.MaxInt64)
		for i, up := range route {
			if d := statsOf(up, stream).average(); d < lowest {
				b, lowest = i, d
			}
		}
		if statsOf(route[b], stream).exploreDue() {
			// Exploration: now and then another upstream goes first, so that one that got
			// faster is noticed.
			b = (b + 1 + rand.IntN(len(route)-1)) % len(route)
		}
	}
	healthy := route[b].healthy(r.start)
	if healthy {
		r.restBy = s
		if b == 0 {
			return
		}
	}
	out := r.own(len(route))
	out[0] = route[b]
	j := 1
	for i, up := range route { // a loop: cheaper than copy's calls for a few pointers
		if i != b {
			out[j] = up
			j++
		}
	}
	r.route = out
	if !healthy {
		orderBy(out[1:], s, stream)
		healthyFirst(out, r.start)
	}
}

// own returns a route buffer of n upstreams that the call may reorder: the run's own
// buffer when n fits, and marks the route as owned.
func (r *run) own(n int) []*upstream {
	r.routeOwned = true
	if n <= len(r.routeBuf) {
		return r.routeBuf[:n]
	}
	return make([]*upstream, n)
}

// orderRest completes what order left pending, once per call: it orders the upstreams
// after the current one by the call's strategy, and moves those that can serve now ahead
// of those that cannot, each side keeping that order.
func (r *run) orderRest() {
	s := r.restBy
	if s == routing.Default {
		return
	}
	r.restBy = routing.Default
	if len(r.route)-r.pos < 3 {
		return // one upstream left at most: nothing to order
	}
	if !r.routeOwned { // the shared route: order a copy
		r.route = append(r.own(len(r.route))[:0], r.route...)
	}
	rest := r.route[r.pos+1:]
	orderBy(rest, s, r.keep && r.tx == nil)
	healthyFirst(rest, time.Now())
}

// statsOf is up's latency statistics of one-shot calls, or of streams' time to first
// token.
func statsOf(up *upstream, stream bool) *latencyStats {
	if stream {
		return &up.ttftStats
	}
	return &up.latStats
}

// weightedPick returns the index of the upstream of ups that x, in [0, the sum of their
// weights), falls on.
func weightedPick(ups []*upstream, x uint64) int {
	for i, up := range ups[:len(ups)-1] {
		w := weightOf(up)
		if x < w {
			return i
		}
		x -= w
	}
	return len(ups) - 1
}

// orderBy orders ups in place by strategy s: successive weighted draws, or the fewest
// calls in flight or the lowest moving average of latency first, keeping the order of
// ties. It leaves them as they are for routing.Ordered.
func orderBy(ups []*upstream, s routing.Policy, stream bool) {
	if len(ups) < 2 {
		return
	}
	switch s {
	case routing.Weighted:
		weightedOrder(ups)
	case routing.LeastInFlight:
		sortBy(ups, func(up *upstream) int64 { return int64(up.inFlight()) })
	case routing.Latency:
		sortBy(ups, func(up *upstream) int64 { return int64(statsOf(up, stream).average()) })
	}
}

// healthyFirst moves the upstreams of ups that can serve at now ahead of those that cannot,
// each side keeping its order.
func healthyFirst(ups []*upstream, now time.Time) {
	healthy := 0
	for i, up := range ups {
		if up.healthy(now) {
			if i != healthy {
				copy(ups[healthy+1:i+1], ups[healthy:i]) // keep the order among the others
				ups[healthy] = up
			}
			healthy++
		}
	}
}

// maxStackRoute is the longest route that sortBy sorts without allocating.
const maxStackRoute = 8

// sortBy orders ups by key, smallest first, keeping the order of equal keys; each key is
// computed once. Routes are short: an insertion sort over keys on the stack.
func sortBy(ups []*upstream, key func(*upstream) int64) {
	var buf [maxStackRoute]int64
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

// needsLatency reports whether hedging h learns its delay from observed latencies.
func needsLatency(h routing.Hedge) bool { return h.On && h.Delay == 0 }

// exploreEvery is how often, one call in so many, latency routing tries another upstream
// first: rarely enough to stay out of the 99th percentile, often enough that a recovered
// upstream is back within seconds under load. It counts the latencies recorded on the
// upstream the call would start on (latencyStats.exploreDue), so that deciding costs an
// atomic load instead of a random number per call.
const exploreEvery = 200

// maxWeight bounds Upstream.Weight, so that a route's total cannot overflow.
const maxWeight = 1 << 20

// weightOf is up's routing weight: Upstream.Weight within [1, maxWeight].
func weightOf(up *upstream) uint64 { return uint64(min(max(up.weight.Load(), 1), maxWeight)) }

// maxSpan bounds the product of the totals that weightedOrder draws from one random
// number: each draw then errs from its exact probability by less than 2^-20 relative.
const maxSpan = 1 << 44

// weightedOrder orders ups as successive weighted draws without replacement: the first
// is drawn with probability weight/total, the next among the rest in the same way, and so
// on. One 64-bit random number serves successive draws (each takes the high word of its
// product with the draw's total and leaves the low word to the next) while the product of
// their totals stays within maxSpan.
func weightedOrder(ups []*upstream) {
	var total uint64
	for _, up := range ups {
		total += weightOf(up)
	}
	u, span := rand.Uint64(), total
	for i := 0; i < len(ups)-1; i++ {
		x, rest := bits.Mul64(u, total) // x is uniform in [0, total)
		j := i + weightedPick(ups[i:], x)
		chosen := ups[j]
		total -= weightOf(chosen)
		if j != i {
			copy(ups[i+1:j+1], ups[i:j]) // the rest keep their order
			ups[i] = chosen
		}
		if i+2 < len(ups) { // another draw follows
			if hi, lo := bits.Mul64(span, total); hi != 0 || lo > maxSpan {
				u, span = rand.Uint64(), total
			} else {
				u, span = rest, lo
			}
		}
	}
}

// demoteSlow moves the upstreams of an ordered route that calls start elsewhere from for
// now (upstream.demoted) behind the others, each side keeping its order.
func (r *run) demoteSlow() {
	out := r.own(len(r.route))
	j := 0
	for _, up := range r.route {
		if !up.demoted(r.start) {
			out[j] = up
			j++
		}
	}
	for _, up := range r.route {
		if up.demoted(r.start) {
			out[j] = up
			j++
		}
	}
	r.route = out
}

const numRoutings = routing.Latency + 1
