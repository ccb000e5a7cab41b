package redisstore

import (
	"math"
	"strconv"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// Bounds on the numbers the store takes from its callers: a request's token cost, a usage
// report, a remaining-quota header, a Retry-After, a scope's rates. The scripts compute
// with Lua numbers (doubles) on microseconds since the Unix epoch, and the store turns
// their results back into int64 durations, so an unbounded amount could lose precision,
// overflow, make Redis refuse an expiry (and the script fail, marking Redis down for every
// scope) or lock a scope for centuries. The store clamps each amount before calling a
// script, and each script clamps its arguments again, so that no argument can make it
// fail.
const (
	// MaxCharge bounds one charge of a bucket (a reservation, or an adjustment such as a
	// usage report above the estimate) in time of the bucket's rate: a charge takes at
	// most a minute's worth of the rate, or the whole burst when that is larger. A request
	// larger than the bucket is still admitted when the bucket is full and leaves a debt,
	// but the debt one charge leaves is at most MaxCharge minus the bucket's own time, so
	// a bogus MaxTokens or usage report delays the key by at most about a minute. For a
	// Client's key a minute of the rate is its TPM (RPM for the request bucket): six
	// buckets with the default burst fraction (1/6). Give-backs are bounded the same way,
	// and a bucket never holds more than its burst anyway. An upstream refuses a request
	// larger than its per-minute quota, so nothing it would count is lost.
	MaxCharge = time.Minute
	// MaxPause bounds one Pause (a 429's Retry-After): a longer pause lasts MaxPause, after
	// which one request finds out whether the key is still limited and pauses it again.
	MaxPause = 15 * time.Minute
	// WaitHorizon bounds every wait the store reports: a reservation that would wait
	// longer is refused (ok false, with the wait WaitHorizon) even when its MaxWait is
	// negative. A rate below one unit per WaitHorizon refills one unit per WaitHorizon, and
	// a bucket holds at most WaitHorizon of its rate. No time the store writes lies more
	// than twice WaitHorizon ahead of the Redis server's clock (room for a reservation
	// admitted at the horizon to be charged in full); an adjustment that would push a
	// bucket further saturates there. So every key the store writes expires within twice
	// WaitHorizon (plus a second).
	WaitHorizon = 24 * time.Hour
)

// Derived bounds, in the scripts' units.
const (
	horizonMicros = int64(WaitHorizon / time.Microsecond)
	chargeMicros  = int64(MaxCharge / time.Microsecond)
	pauseMicros   = int64(MaxPause / time.Microsecond)
	// maxSlots stands for any larger concurrency bound: a float64 still counts it exactly.
	maxSlots = 1 << 53
)

// bucket is one token bucket as the scripts take it: interval is the µs per unit (0: no
// limit), burst its size, and charge the most one charge takes, all clamped.
type bucket struct {
	interval, burst, charge float64
}

// newBucket returns the bucket of rate r times share: no limit when the rate is not
// positive and finite; at least one unit per WaitHorizon; a burst in [0, WaitHorizon of
// the rate]; a charge of at most MaxCharge of the rate or the burst.
func newBucket(r limitstore.Rate, share float64) bucket {
	rate := r.PerSecond * share
	if !(rate > 0) || math.IsInf(rate, 1) {
		return bucket{}
	}
	interval := min(1e6/rate, float64(horizonMicros))
	burst := r.Burst * share
	if !(burst > 0) {
		burst = 0
	}
	burst = min(burst, float64(horizonMicros)/interval)
	return bucket{interval: interval, burst: burst, charge: max(burst, float64(chargeMicros)/interval)}
}

// clamp returns n units bounded by the bucket's charge, either way.
func (b bucket) clamp(n float64) float64 { return max(-b.charge, min(n, b.charge)) }

// sanitized returns spec with the bounds above applied, so that the local fallback (an
// in-memory store) sees the same limits as Redis: rates that are not positive and finite
// limit nothing, others refill at least one unit per WaitHorizon and hold at most
// WaitHorizon of their rate; MaxConcurrent is at most 2^53; a BatchShare outside (0, 1]
// is 1.
func sanitized(spec limitstore.Spec) limitstore.Spec {
	for _, r := range []*limitstore.Rate{&spec.Requests, &spec.Tokens} {
		b := newBucket(*r, 1)
		if b.interval == 0 {
			*r = limitstore.Rate{}
			continue
		}
		r.PerSecond = max(r.PerSecond, 1e6/float64(horizonMicros))
		r.Burst = b.burst
	}
	spec.MaxConcurrent = max(0, min(spec.MaxConcurrent, maxSlots))
	if !(spec.BatchShare > 0 && spec.BatchShare <= 1) {
		spec.BatchShare = 1
	}
	return spec
}

// shareOf returns the slots that share of n leaves, at least one.
func shareOf(n int, share float64) int {
	return max(1, int(math.Min(math.Floor(float64(n)*share), maxSlots)))
}

// micros returns d in whole microseconds, rounded up, within [0, limit].
func micros(d time.Duration, limit int64) int64 {
	if d <= 0 {
		return 0
	}
	return min(int64(d/time.Microsecond)+int64(min(d%time.Microsecond, 1)), limit)
}

// duration returns a script's µs as a Duration within [0, WaitHorizon].
func duration(us int64) time.Duration {
	return time.Duration(max(0, min(us, horizonMicros))) * time.Microsecond
}

func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
