package llmclient

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
)

// CallOptions override the Client's options for the calls made with a context that
// carries them (WithCallOptions): typed calls and transport requests alike. A zero field
// keeps the Client's setting, so CallOptions{} changes nothing. They combine with the
// Client's options as follows: caps and timeouts replace the Client's for the call;
// Pin and Exclude narrow the call's route (a model group, or every upstream serving the
// model) and never add to it; NoFailover ends the call on the first upstream that gives up;
// Headers are added to every upstream request of the call; Batch sets the call's priority
// as Request.Priority = ratelimit.Batch would. WithCallOptions copies them, slices,
// headers and Hedge included: what the caller changes afterwards (a header map reused for
// its next call) reaches no call made with the context it returned.
type CallOptions struct {
	// MaxAttempts and MaxTotalAttempts replace WithMaxAttempts and WithMaxTotalAttempts.
	MaxAttempts, MaxTotalAttempts int
	// AttemptTimeout replaces WithAttemptTimeout and the upstream's Timeout for one-shot
	// attempts (the time-budget rule still applies under a deadline).
	AttemptTimeout time.Duration
	// Pin limits the route to these upstreams, in this order, when they are in it.
	Pin []string
	// Exclude removes these upstreams from the route.
	Exclude []string
	// NoFailover keeps the call on its first upstream: when it gives up, the call ends.
	NoFailover bool
	// Routing replaces the route's strategy (WithRouting) for the call.
	Routing routing.Policy
	// Hedge, when not nil, replaces the route's hedging (WithHedging) for the call; a
	// pointer to the zero Hedge turns hedging off.
	Hedge *routing.Hedge
	// Headers are sent with every upstream request of the call, such as an idempotency
	// key or a tracing header; they never replace the credential.
	Headers http.Header
	// Batch admits the call as ratelimit.Batch, for callers (transport mode) whose Request
	// they cannot set.
	Batch bool
}

type callOptionsKey struct{}

// WithCallOptions returns a context whose calls use o (see CallOptions). The last one set
// on a context chain wins; they do not merge. The returned context keeps ctx's deadline
// and cancellation; an invalid o (negative caps or timeouts, an unknown Routing) fails the
// call with failure.BadRequest before any upstream is tried. Without it, a call uses the
// Client's options.
func WithCallOptions(ctx context.Context, o CallOptions) context.Context {
	o.Pin, o.Exclude, o.Headers = slices.Clone(o.Pin), slices.Clone(o.Exclude), o.Headers.Clone()
	if o.Hedge != nil {
		h := *o.Hedge
		o.Hedge = &h
	}
	return context.WithValue(ctx, callOptionsKey{}, &o)
}

// callOptions returns the call options ctx carries, or nil.
func callOptions(ctx context.Context) *CallOptions {
	o, _ := ctx.Value(callOptionsKey{}).(*CallOptions)
	return o
}

// check reports a CallOptions value the call cannot use.
func (o *CallOptions) check() error {
	switch {
	case o.MaxAttempts < 0 || o.MaxTotalAttempts < 0:
		return &Error{Class: failure.BadRequest, Message: "CallOptions: negative attempt caps"}
	case o.AttemptTimeout < 0:
		return &Error{Class: failure.BadRequest, Message: "CallOptions: negative AttemptTimeout"}
	case o.Routing >= numRoutings:
		return &Error{Class: failure.BadRequest, Message: "CallOptions: unknown Routing"}
	case o.Hedge != nil && o.Hedge.Delay < 0:
		return &Error{Class: failure.BadRequest, Message: "CallOptions: negative Hedge.Delay"}
	}
	return nil
}

// applyCallOptions narrows the run's route and sets what the call's options change, once
// the run has begun.
// extendRoute continues the call on list (a budget's Reroute group, a context or content
// fallback) after the current upstream, narrowed by the call's options as its route was
// (Pin, Exclude: they never add to the route). It reports false, changing nothing, when
// the options leave none of list or keep the call where it is (NoFailover).
func (r *run) extendRoute(list []*upstream) bool {
	if o := r.opts; o != nil {
		if o.NoFailover {
			return false
		}
		if len(o.Pin) > 0 || len(o.Exclude) > 0 {
			list = slices.DeleteFunc(slices.Clone(list), func(up *upstream) bool {
				return len(o.Pin) > 0 && !slices.Contains(o.Pin, up.Name) || slices.Contains(o.Exclude, up.Name)
			})
		}
	}
	if len(list) == 0 {
		return false
	}
	r.route = append(r.route[:r.pos+1:r.pos+1], list...)
	return true
}

func (r *run) applyCallOptions(o *CallOptions) {
	r.opts = o
	if !r.c.needStats.Load() && (o.Routing == routing.Latency || o.Hedge != nil && needsLatency(*o.Hedge)) {
		// The first call to ask for latency routing or a delay learned from latencies:
		// the upstreams record their latencies from now on.
		r.c.needStats.Store(true)
	}
	if len(o.Pin) > 0 || len(o.Exclude) > 0 {
		route := make([]*upstream, 0, len(r.route))
		if len(o.Pin) > 0 {
			for _, name := range o.Pin {
				for _, up := range r.route {
					if up.Name == name && !slices.Contains(route, up) {
						route = append(route, up)
					}
				}
			}
		} else {
			route = append(route, r.route...)
		}
		route = slices.DeleteFunc(route, func(up *upstream) bool { return slices.Contains(o.Exclude, up.Name) })
		r.route = route
	}
	if o.Batch && r.req.Priority != ratelimit.Batch {
		if r.tx != nil {
			r.req.Priority = ratelimit.Batch // the transport's own request
		} else {
			cp := *r.req
			cp.Priority = ratelimit.Batch
			r.req, r.orig = &cp, &cp
		}
	}
}
