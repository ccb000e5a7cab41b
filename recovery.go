package llmclient

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// The recovery ramp's shape: it starts at rampStart calls a second and doubles the rate
// rampSteps times over its span, ending near a thousand a second.
const (
	rampStart = 1.0
	rampSteps = 10
)

// maxRecoveryRamp bounds WithRecoveryRamp.
const maxRecoveryRamp = time.Hour

// WithRecoveryRamp makes an upstream whose breaker has just closed take its traffic back
// over d instead of all at once: for d after the breaker closes, its calls are paced by a
// rate that starts at one a second and doubles ten times (d/10 apart), so that an upstream
// still fragile after its half-open probes is not flooded by every waiting caller. A call
// the ramp does not admit goes to the next upstream of its route, as when the breaker is
// open (a local refusal in the trace, wrapping ErrCircuitOpen); a call with nowhere else to
// go is always admitted. Hedges follow the same pacing. It needs no deadline. d must be
// within [0, 1h]. Default 0: off — the project has no measurement yet that a ramp helps
// LLM upstreams more than the breaker's probes do.
func WithRecoveryRamp(d time.Duration) Option {
	return optionFunc(func(c *config) { c.recoveryRamp = d })
}

// recoveryRamp paces an upstream's calls for a while after its breaker closed. It is safe
// for concurrent use; outside a ramp, allow costs one atomic load.
type recoveryRamp struct {
	span   time.Duration
	active atomic.Bool

	mu    sync.Mutex
	start time.Time
	lim   *rate.Limiter
}

func newRecoveryRamp(span time.Duration) *recoveryRamp {
	if span <= 0 {
		return nil
	}
	return &recoveryRamp{span: span, lim: rate.NewLimiter(rampStart, 1)}
}

// begin starts a ramp at now.
func (r *recoveryRamp) begin(now time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.start = now
	r.lim = rate.NewLimiter(rampStart, 1)
	r.mu.Unlock()
	r.active.Store(true)
}

// allow reports whether the ramp admits a call at now.
func (r *recoveryRamp) allow(now time.Time) bool {
	if r == nil || !r.active.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	elapsed := now.Sub(r.start)
	if elapsed >= r.span {
		r.active.Store(false)
		return true
	}
	perSec := rampStart * math.Exp2(rampSteps*float64(elapsed)/float64(r.span))
	r.lim.SetLimitAt(now, rate.Limit(perSec))
	r.lim.SetBurstAt(now, max(1, int(perSec)))
	return r.lim.AllowN(now, 1)
}

// errRamping is the cause of a call the recovery ramp passed to the next upstream.
var errRamping = fmt.Errorf("%w: the upstream is taking its traffic back after recovering", ErrCircuitOpen)
