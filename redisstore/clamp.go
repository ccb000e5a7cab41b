package redisstore

import (
	"math"
	"strconv"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// Bounds on the numbers the store takes from its callers: a request's token cost, a usage
// report, an upstream's report, a Retry-After, an eviction, a scope's rates. The scripts
// compute with Lua numbers (doubles) on microseconds since the Unix epoch, and the store
// turns their results back into int64 durations, so an unbounded amount could lose
// precision, overflow, make Redis refuse an expiry (and the script fail, marking Redis
// down for every scope) or lock a scope for centuries. The store clamps each amount
// before calling a script (counts to ±limitstore.MaxBurst, NaN and infinite counts sent
// as unknown), and each script clamps its arguments again, so that no argument can make
// it fail. Within these bounds the store applies limitstore's (see the limitstore
// package): the same as the in-memory store's.
const (
	// MaxCharge is limitstore.ChargeHorizon: one charge of a bucket (a reservation, or an
	// adjustment such as a usage report above the estimate) takes at most the bucket's
	// burst plus MaxCharge of its refill, and an adjustment leaves at most MaxCharge of
	// refill owing beyond an empty bucket. A request larger than the bucket is still
	// admitted when the bucket is full, and a bogus MaxTokens or usage report delays the
	// key by at most about a minute. An upstream refuses a request larger than its
	// per-minute quota, so nothing it would count is lost.
	MaxCharge = limitstore.ChargeHorizon
	// MaxPause bounds one Pause (a 429's Retry-After): a longer pause lasts MaxPause, after
	// which one request finds out whether the key is still limited and pauses it again.
	MaxPause = 15 * time.Minute
	// WaitHorizon bounds every wait the store reports: a reservation that would wait
	// longer is refused (ok false, with the wait WaitHorizon) even when its MaxWait is
	// negative. A rate below one unit per WaitHorizon refills one unit per WaitHorizon, a
	// bucket holds at most WaitHorizon of its rate (a day's quota refilled over the day
	// fits), and an eviction lasts at most WaitHorizon. No time the store writes lies more
	// than twice WaitHorizon ahead of the Redis server's clock; an adjustment that would
	// push a bucket further saturates there. So every key of a scope's state expires
	// within twice WaitHorizon plus an hour; a budget's hash lives as long as its window
	// (see Store.OpenBudget), a breaker's record at most a day.
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

// specArgs are a spec as the bucket scripts take it: the interval in µs per unit ("0": no
// limit) and the burst of the requests, tokens, daily requests and daily tokens buckets,
// then the batch share.
type specArgs [9]any

// argsOf returns the script arguments of a sanitized spec.
func argsOf(spec limitstore.Spec) specArgs {
	var a specArgs
	for i, r := range [4]limitstore.Rate{spec.Requests, spec.Tokens, spec.DailyRequests, spec.DailyTokens} {
		a[2*i], a[2*i+1] = "0", "0"
		if r.Limited() {
			a[2*i], a[2*i+1] = formatFloat(interval(r.PerSecond)), formatFloat(r.Burst)
		}
	}
	a[8] = formatFloat(spec.BatchShare)
	return a
}

// interval is the µs per unit of a positive finite rate, at most WaitHorizon.
func interval(perSecond float64) float64 { return min(1e6/perSecond, float64(horizonMicros)) }

// sanitized returns spec with the bounds above applied, so that the local fallback (an
// in-memory store) sees the same limits as Redis: rates that are not positive and finite
// limit nothing, others refill at least one unit per WaitHorizon; a burst is within
// [1, limitstore.MaxBurst] (NaN is 1) and at most WaitHorizon of its rate; MaxConcurrent
// is at most 2^53; a BatchShare outside (0, 1] is 1.
func sanitized(spec limitstore.Spec) limitstore.Spec {
	for _, r := range []*limitstore.Rate{&spec.Requests, &spec.Tokens, &spec.DailyRequests, &spec.DailyTokens} {
		if !r.Limited() {
			*r = limitstore.Rate{}
			continue
		}
		r.PerSecond = max(r.PerSecond, 1e6/float64(horizonMicros))
		r.Burst = min(r.Size(), float64(horizonMicros)/interval(r.PerSecond))
	}
	spec.MaxConcurrent = max(0, min(spec.MaxConcurrent, maxSlots))
	if !(spec.BatchShare > 0 && spec.BatchShare <= 1) {
		spec.BatchShare = 1
	}
	return spec
}

// amount clamps a count for a script to ±limitstore.MaxBurst, which a double holds
// exactly; the scripts cap each charge further, per bucket.
func amount(n int) int { return max(-limitstore.MaxBurst, min(n, limitstore.MaxBurst)) }

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
