// Package limitstore is the contract between llmclient's limiter and the place it keeps
// its state, and the in-memory implementation a Client uses by default. Implement Store to
// share limits between processes (the redisstore module does, on Redis); users who only
// configure a Client never need this package beyond passing a Store to
// llmclient.WithLimitStore.
//
// # Numeric bounds
//
// Every implementation applies the same bounds, so that no single request, usage report or
// header can switch a limit off, wrap a wait negative or block a scope for hours. The
// in-memory store is the reference implementation of these rules:
//
//   - A bucket with a PerSecond that is not a finite positive number has no limit; a
//     limited bucket's Burst is at least 1 (NaN or less means 1) and at most MaxBurst.
//   - One charge on one bucket — a Reservation's Requests or Tokens, a positive Adjust
//     amount — is capped at Rate.MaxCharge: the bucket's burst plus ChargeHorizon (one
//     minute) of its refill. A request costing more is admitted once the bucket is full
//     and leaves at most a minute of debt.
//   - A positive Adjust never pushes a bucket's debt past DebtHorizon (one minute) of its
//     refill beyond an empty bucket; debt that reservations already hold is kept, but an
//     adjustment adds nothing to it then. Negative amounts give back at most what makes the
//     bucket full.
//   - A Report's correction is applied like Adjust (capped and bounded the same way, in
//     both directions); a NaN or infinite count in it is unknown and changes nothing.
//     The correction count of a bucket is the sum of the level changes actually made.
//     Durations that are not positive are ignored (Pause, Evict).
//   - Every duration returned (waits, pauses, evictions) is rounded up to the nanosecond
//     and saturates at the largest time.Duration instead of overflowing.
package limitstore

import (
	"context"
	"errors"
	"math"
	"time"
)

// Store keeps the limiter's state: for each limited scope (an API key, or a caller
// partition) request and token buckets, a pause, an eviction and concurrency slots. The
// default is in memory, private to the Client (NewMemory). A store shared by several
// processes, such as one on Redis, lets replicas that use the same API keys admit against
// one quota and see each other's key pauses and evictions; it must make every State method
// atomic on its own side, on its own clock, as described on State.
type Store interface {
	// Open returns the state of the scope name with the given limits, creating it on
	// first use. Scopes with the same name share their state, whatever spec later callers
	// pass (the first one's applies until Retune changes it); the empty name is a scope
	// private to the caller. A zero Spec is valid: the scope limits nothing but still
	// holds the key's pause and eviction, which the Client shares through a store even for
	// keys without limits. The Client opens each API key's scope in New and each
	// partition's scope on its first request, so Open must not block: a networked store
	// connects lazily. Names never contain an API key.
	Open(name string, spec Spec) State
}

// Spec is what a scope enforces, with every default already applied.
type Spec struct {
	// Requests is the per-minute request bucket; zero PerSecond means no request limit.
	Requests Rate
	// Tokens is the per-minute token bucket; zero PerSecond means no token limit.
	Tokens Rate
	// DailyRequests and DailyTokens are long-window buckets beside the per-minute ones: a
	// day's quota (llmclient's Limits.RPD and TPD, a burst of the whole day refilled over
	// the day), or a window longer than a minute learned from an upstream's headers. Zero
	// PerSecond means none. Only LaneMain draws from them.
	DailyRequests Rate
	DailyTokens   Rate
	// MaxConcurrent bounds the slots in use; 0 means no bound.
	MaxConcurrent int
	// BatchShare is the share of each per-minute bucket's rate and burst, and of the slots,
	// that PriorityBatch traffic may use, in (0, 1]; 1 means batch is not set apart.
	BatchShare float64
}

// ErrRefused is wrapped by the errors of a State that refuses to admit: no concurrency
// slot came in time, or a shared store cannot be reached and fails closed. The limiter
// reports such an error as llmclient.ErrRateLimited, keeping the store's own error in the
// chain.
var ErrRefused = errors.New("limitstore: refused")

// Rate is a token bucket: it holds at most Burst and refills at PerSecond.
type Rate struct {
	PerSecond float64
	Burst     float64
}

// Bounds on every bucket (see the package documentation).
const (
	// ChargeHorizon is how much of a bucket's refill one charge may cost beyond its burst.
	ChargeHorizon = time.Minute
	// DebtHorizon is how much refill a positive Adjust may leave a bucket owing.
	DebtHorizon = time.Minute
	// MaxBurst is the largest bucket size; larger bursts are clamped to it. It is far above
	// any quota and keeps every sum of charges exact in a float64.
	MaxBurst = 1 << 50
)

// Limited reports whether r limits anything: its PerSecond is a finite positive number.
func (r Rate) Limited() bool { return r.PerSecond > 0 && !math.IsInf(r.PerSecond, 1) }

// Size is the bucket's effective burst: Burst clamped to [1, MaxBurst] (NaN is 1).
func (r Rate) Size() float64 {
	if !(r.Burst >= 1) {
		return 1
	}
	return min(r.Burst, MaxBurst)
}

// MaxCharge is the most one charge takes from the bucket: its Size plus ChargeHorizon of
// refill. It is 0 for a bucket that limits nothing.
func (r Rate) MaxCharge() float64 {
	if !r.Limited() {
		return 0
	}
	return r.Size() + min(r.PerSecond*ChargeHorizon.Seconds(), MaxBurst)
}

// Lane selects the buckets a reservation draws from.
type Lane uint8

const (
	// LaneMain holds the scope's buckets: every admitted request draws from them.
	LaneMain Lane = iota
	// LaneBatch is the gate that PriorityBatch requests pass before LaneMain: buckets of
	// BatchShare times the main per-minute rates and bursts, so batch traffic never takes
	// more than its share and queued batch requests hold no main-bucket capacity while
	// they wait.
	LaneBatch
)

// Reservation asks a State for one request's capacity.
type Reservation struct {
	Lane Lane
	// Requests is the number of requests to take, 0 or 1.
	Requests int
	// Tokens is the request's token cost. A cost larger than the bucket is admitted when
	// the bucket is full, and the rest becomes debt that later requests wait for; the
	// charge is capped at the bucket's MaxCharge.
	Tokens int
	// Estimate is the same cost before the caller's calibration (what it estimated,
	// before it scaled the estimate by what the upstream turned out to count); 0 means
	// Tokens. The store only adds it up (Totals), on LaneMain.
	Estimate int
	// MaxWait is the longest wait the caller accepts; a negative value means no bound.
	MaxWait time.Duration
	// InFlight marks Tokens that a vendor counts only when the request ends (the output
	// it generates): they are charged now, as any, and held as in flight until the caller
	// ends the hold (InFlightAdjuster.AdjustInFlight). The token bucket then refills as the
	// vendor's does: the vendor's own bucket holds the level plus what is in flight, and
	// gets no refill while that is full. Only LaneMain holds; a State that does not
	// implement InFlightAdjuster ignores it. A store shared by several processes keeps
	// each hold under a lease that the process holding it renews, so that the hold of a
	// process that dies before it ends the hold ends within the lease (see
	// InFlightAdjuster).
	InFlight bool
	// VendorBurst is the size of the vendor's bucket for InFlight tokens, when known
	// (0: the token bucket's burst): the vendor's bucket is full when the level plus
	// what is held reaches it. The State keeps the last one given.
	VendorBurst float64
	// At is the caller's reading of the clock, taken just before it asked, which a store
	// may use instead of reading its own (the in-memory states do; a shared store keeps
	// its server's clock). The zero time means none. A reading a little in the past only
	// makes the wait it is granted that much longer.
	At time.Time
}

// InFlightAdjuster is implemented by the States that hold Reservation.InFlight charges
// (the in-memory ones, redisstore's).
//
// A hold ends once: AdjustInFlight ends it, or, in a store shared by several processes,
// its lease does when the process that made it stops renewing it (it died, or lost the
// store for longer than the lease). The held tokens never go below zero: ending a hold
// that already ended (a second release, a release after the lease ran out or after the
// store lost its data) ends nothing, in a store that keeps each hold; the in-memory
// states, which die with their holders, keep only the sum and take at most what it holds.
type InFlightAdjuster interface {
	// AdjustInFlight ends the hold of the reservation whose Grant carried mark, of held
	// tokens (its Tokens; at most what is held), then adjusts LaneMain by requests and
	// tokens as Adjust does: the request's end, with the difference between its charge
	// and what the vendor counted, or its charge given back. A store that keeps each hold
	// finds it by mark and ends all of it (0 ends none there); the in-memory states end
	// held tokens of the sum.
	AdjustInFlight(ctx context.Context, mark int64, held, requests, tokens int) error
}

// Levels are counts for a scope's main buckets: what a State predicts is left right
// after a request's charge (Grant), what that level should have been (Report), or the
// corrections Sync made. NaN means unknown.
type Levels struct {
	Requests, Tokens, DailyRequests, DailyTokens float64
}

// Unknown is a Levels with every count unknown.
var Unknown = Levels{math.NaN(), math.NaN(), math.NaN(), math.NaN()}

// Grant is a State's answer to a Reservation.
type Grant struct {
	// Wait is the wait until the admission time; when OK is false, the wait the
	// reservation would have needed.
	Wait time.Duration
	// OK is false when the wait exceeds the reservation's MaxWait: nothing was taken.
	OK bool
	// Mark numbers the reservation (an opaque, increasing number; 0 for none), for a later
	// Report about the request.
	Mark int64
	// Levels are what each LaneMain bucket holds right after the charge, at the admission
	// time, as the store predicts it — what the upstream should report having left once
	// it counted the request, if every consumer of the quota goes through the store and
	// every charge is right — plus the bucket's correction count: the sum of every level
	// change Sync, Retune and Adjust made to the bucket so far (see Sync). NaN for a bucket
	// without a limit, a refused reservation and LaneBatch.
	Levels Levels
	// Totals are the scope's sums right after the charge (zero for LaneBatch and a
	// refused reservation).
	Totals Totals
}

// Totals are the running sums of a scope's LaneMain charges, as Reserve and Adjust made
// them: the tokens charged, the estimates of those charges (Reservation.Estimate) and the
// requests. Reserve adds a reservation's Tokens, Estimate and Requests (each capped as
// charged). An Adjust that gives a reservation back (requests < 0) takes its tokens and
// requests out, and the estimates in the proportion of the sums (Estimate/Tokens); any
// other Adjust adds its tokens (either sign: a reconciliation with the usage reported)
// and requests, and no estimate. No sum goes below zero; Sync's corrections change none.
// The sums start at 0 and only their differences mean anything.
type Totals struct {
	Tokens, Estimate, Requests float64
}

// Sub returns t - o.
func (t Totals) Sub(o Totals) Totals {
	return Totals{Tokens: t.Tokens - o.Tokens, Estimate: t.Estimate - o.Estimate, Requests: t.Requests - o.Requests}
}

// Report compares what an upstream reported about a request with what the store
// predicted when it admitted it (see State.Sync).
type Report struct {
	// Mark is the Grant's Mark.
	Mark int64
	// Predicted is the Grant's Levels. A request the upstream did not count (it refused
	// it) is given back with Adjust before its report: the correction count holds that.
	Predicted Levels
	// Target is what each bucket should have held at that moment, given the upstream's
	// report (its remaining counts). NaN: unknown.
	Target Levels
	// Reserve is what each bucket should keep in reserve from now on (see State): what
	// the charges admitted but not yet seen by the upstream may be off by. NaN, negative
	// or infinite: keep the bucket's reserve as it is.
	Reserve Levels
	// Totals is the Grant's Totals, less the request's own charge when the upstream did
	// not count it.
	Totals Totals
	// Gain is the part of each error Sync corrects, in (0, 1]; 0 (and anything outside)
	// means 1. A caller that is one of several consumers of a key outside the store
	// corrects only its share of what the upstream reports: the others correct theirs.
	// What is not corrected is seen again by the next report (nothing in the correction
	// count says it was fixed), so the bucket converges on the upstream's view.
	Gain float64
}

// Correction is what Sync did about a report.
type Correction struct {
	// Made is the change made to each bucket (positive: lowered); NaN where Sync made
	// none. A report Sync did not apply has every count NaN.
	Made Levels
	// Covered is what the correction is about: the sums of the charges admitted from
	// the request of the previous applied report (excluded) to this report's (included),
	// Report.Totals less the previous applied report's. Zero for a report not applied.
	Covered Totals
	// Pending is the sums of the charges admitted after this report's request, up to
	// now: requests the upstream may not have seen yet (Totals now less Report.Totals).
	Pending Totals
	// Fit is the scope's charge fit after this report (see Fit).
	Fit Fit
}

// Fit is a scope's running estimate of what the upstream counts for its charges, per
// token of their estimates, kept by Sync so that every process sharing the scope charges
// alike. Each applied report, but the first, adds one observation: the charges admitted
// since the previous observation's request (the first applied report's, before any; the
// scope's start when that report's error is negative, which no consumption before the
// scope explains: the report missed requests admitted before its own),
// this one's included, plus its fresh token error is what the upstream counted for their
// estimated tokens. The error is Predicted − corrected − Target of the per-minute token
// bucket, else of the daily one, before Gain; the fresh error is that less the residual
// of the previous observation (its error less the change it made divided by its Gain:
// what a cap, not the gain, left for later reports to see again), less the changes
// divided by their Gain that reports made since. A caller correcting with a Gain below 1
// thus observes the part it defers again in later reports: its multiplier leans high,
// which gives a partitioned key some headroom. A fresh error that gives back into a
// bucket whose target is above nine tenths of its burst is censored: the bucket may have
// been full, and refill lost, so what it implies was counted is only an upper bound. It
// is an observation without a noise update, of FitProbe times that bound where the
// multiplier would have counted more, else of what the multiplier counts (it confirms
// the fit), and none before the first observation. An upstream that counts far less than
// the estimates stays nearly full: its level says only that the multiplier is not too
// low, whatever the multiplier (the bound is about what was charged). The probe lowers
// the multiplier by about 1.4% a report (1 - FitForget, times 1 - FitProbe) while that
// lasts, until the level falls under nine tenths and uncensored reports take over.
// Without it the fit stayed short of FitMinReports, or the multiplier where the first
// observations left it, and an upstream charging 0.3x the estimates saw 59-78% of its
// quota used. An
// observation of no estimated tokens is none either; a report that makes none leaves the
// baseline of the next observation where the previous one set it. Requests
// admitted together reach the upstream in any order, so a report can miss requests
// admitted before its own, an error that the next reports no longer see: a report that
// made no observation moving the baseline would book that error, reversed, as counted
// (a process alone on its key fitted a multiplier up to 1.1 and left that much idle).
// Retune keeps the residual. With x = counted, y = estimated:
//
//	if censored:
//	    if not (Reports >= 1 and Estimated > 0): no observation
//	    x = min(FitProbe·x, y·Counted/Estimated)
//	else if Estimated > 0 and Reports >= 1:
//	    v = (x − y·Counted/Estimated)² / y
//	    if Reports >= FitMinReports and Noise > 0: v = min(v, 9·Noise)
//	    Noise += (v − Noise) · max(1 − FitForget, 1/(Reports+1))
//	Counted = FitForget·Counted + x
//	Estimated = FitForget·Estimated + y
//	Reports = Reports + 1
//
// The multiplier is Counted/Estimated; Noise is the variance of an observation per
// estimated token about it.
type Fit struct {
	Counted, Estimated, Noise, Reports float64
}

// The Fit's constants.
const (
	// FitForget is how much an observation weighs less than the next.
	FitForget = 0.98
	// FitMinReports is how many observations a Fit needs to be used.
	FitMinReports = 3
	// FitProbe is the share of a censored observation's bound that it counts (see Fit).
	FitProbe = 0.3
)

// Known reports whether f has enough observations.
func (f Fit) Known() bool { return f.Reports >= FitMinReports && f.Estimated >= 1 }

// Ratio is the fitted multiplier.
func (f Fit) Ratio() float64 { return max(f.Counted, 0) / f.Estimated }

// Block is how long a scope's key stays out of use, for every process that shares it.
type Block struct {
	// Paused is what is left of the pause after a rate limit (see State.Pause); 0: none.
	Paused time.Duration
	// Evicted is what is left of the eviction (see State.Evict); 0: none.
	Evicted time.Duration
}

// SlotLease is one concurrency slot held. A shared store gives it an expiry, renewed
// while held, so a crashed process's slots come back.
type SlotLease struct {
	ID    uint64
	Batch bool
}

// State is one scope's state. Every method is atomic with respect to the others, in
// every process that shares the scope, and reads time from the store's own clock, so
// processes with skewed clocks agree. Methods other than AcquireSlot do not block beyond
// the store's own round trip, which they bound by ctx.Deadline() and not by ctx.Done()
// alone: a call without a deadline passes a context that reports its call budget's end
// (llmclient.WithCallBudget) as its deadline, and no timer ends it then. Implementations
// must be safe for concurrent use.
//
// Buckets follow the generic cell rate algorithm, one number per bucket (its theoretical
// arrival time), which a server-side script can update in one step: a reservation's
// admission time is the earliest moment every bucket of its lane holds its cost plus the
// bucket's reserve (at most the bucket's burst) and the scope is not paused; each bucket
// is then charged at that moment. A bucket's reserve is 0 until a report sets it (Sync);
// it is at most the burst, and the batch lane has none. Reservations are served in arrival order, none is polled, and a reservation
// whose wait exceeds its MaxWait takes nothing. The numeric bounds of the package
// documentation apply to every method.
type State interface {
	// Reserve admits r at the earliest possible time and returns the wait until then, or
	// takes nothing and returns the wait it would have needed with OK false when that
	// wait exceeds r.MaxWait.
	Reserve(ctx context.Context, r Reservation) (Grant, error)
	// Adjust gives back (negative amounts) or takes (positive amounts) requests and tokens
	// of the lane's buckets after the fact: a canceled reservation, an attempt that failed
	// before the upstream counted it, the difference between estimated and reported usage,
	// consumption that the upstream's headers show. A request amount applies to the
	// request buckets, a token amount to the token buckets (per-minute and daily on
	// LaneMain). A bucket never holds more than its burst.
	Adjust(ctx context.Context, lane Lane, requests, tokens int) error
	// Sync corrects the main buckets by what an upstream's report shows the store got
	// wrong, so that processes sharing a scope never correct the same error twice:
	//   - A report about a request admitted before the latest one a report was applied
	//     for (r.Mark at most that one's) describes an error already corrected: it
	//     changes nothing.
	//   - Otherwise, for each bucket with a known prediction and target, the error is
	//     Predicted − Target less the corrections made since the grant (the bucket's
	//     correction count now minus the one the grant's Levels included): what earlier
	//     reports, retunes and adjustments (a reservation given back, a reconciliation
	//     with the usage) changed after the grant is not changed again. The bucket
	//     takes r.Gain times the error from its current level (gives it back when
	//     negative), as Adjust does and with the same bounds, but gives back at most
	//     what Sync took from it before (the net of its Sync changes stays a lowering):
	//     a report can lower a bucket below the store's own accounting and bring it
	//     back, never raise it above. Its correction count grows by the change made.
	//   - An applied report sets each bucket's reserve to r.Reserve's count, where
	//     known, and adds an observation to the scope's Fit.
	//
	// Sync returns what it did (Correction); the scope remembers r.Totals as the previous
	// applied report's for the next Covered.
	Sync(ctx context.Context, r Report) (Correction, error)
	// Retune sets the rates and bursts of the buckets to spec's, keeping what each bucket
	// owes: it stays as far below its new burst as it was below its old one, the change
	// of level counting as a correction for Sync, and it keeps its reserve (at most the
	// new burst) and its net Sync lowering. A bucket that had no limit starts full, a
	// bucket whose rate becomes zero stops limiting. The batch lane follows the per-minute
	// buckets times the BatchShare given to Open; spec's MaxConcurrent and BatchShare are
	// ignored. The limiter calls it when it learns an upstream's limits or window from its
	// headers.
	Retune(ctx context.Context, spec Spec) error
	// Pause stops admission for d from now, for every caller of the scope: the upstream
	// answered 429 with a Retry-After. A longer pause already in force is kept.
	Pause(ctx context.Context, d time.Duration) error
	// Evict marks the scope's key out of use for d from now, for every caller: the
	// upstream refused the key (an auth failure, an exhausted quota). A longer eviction
	// already in force is kept. Reserve does not wait for an eviction: the Client does not
	// pick an evicted key, which it learns from Blocked.
	Evict(ctx context.Context, d time.Duration) error
	// Blocked returns what is left of the scope's pause and eviction.
	Blocked(ctx context.Context) (Block, error)
	// AcquireSlot takes a concurrency slot, waiting in arrival order for at most maxWait
	// (negative: no bound) or until ctx is done. Batch requests hold at most BatchShare of
	// the slots (at least one). It returns the time it waited; when no slot came in time it
	// returns an error that wraps ErrRefused, or ctx's error.
	AcquireSlot(ctx context.Context, batch bool, maxWait time.Duration) (SlotLease, time.Duration, error)
	// ReleaseSlot gives back a slot that AcquireSlot returned.
	ReleaseSlot(lease SlotLease)
}

// Duration converts nanoseconds to a Duration, rounding up and saturating: NaN and
// values at most 0 are 0, values beyond the largest Duration are the largest Duration.
// Stores use it for every duration they return.
func Duration(ns float64) time.Duration {
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(ns))
}
