package redisstore

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// state is one scope's limitstore.State in Redis. It holds only what it derives from the
// scope's name and limits, the spec it last asked Redis to enforce, and the ids of the
// slot leases this process holds there.
type state struct {
	s        *Store
	name     string
	spec     limitstore.Spec // sanitized (clamp.go), as opened
	local    limitstore.Spec // the FailOpen fallback's limits
	bucket   []string        // the scope's hash, then its holds (hz: scripts.go)
	slotKeys []string        // s, sb, w, wx
	// leaseArg is the lease of a hold in µs, as the scripts take it (a string).
	leaseArg any
	// args is the spec this process enforces as the bucket scripts' first arguments: what
	// a script stores when the scope's hash holds none yet.
	args atomic.Pointer[specArgs]
	// slotArgs are the slot script's arguments after op and member: max slots, max batch
	// slots, lease TTL (ms), waiter TTL (ms).
	slotArgs [4]any

	mu sync.Mutex
	// held are the Redis leases this process holds, renewed in the background: id → batch.
	held map[uint64]bool
	// unreleased are leases given back while Redis could not be reached, released again
	// once it answers, unless they have expired by then.
	unreleased map[uint64]unreleased
	// holds are the in-flight holds this process made in Redis and has not ended, whose
	// leases it renews: their members in hz by mark.
	holds map[int64]string
	// giving are the numbers of this process's give-backs on the scope on their way to
	// Redis (giveBack), the next one being gaveNext; settling are the slot requests that
	// wait for those numbered below theirs. givingN is len(giving), read without st.mu.
	giving   map[uint64]struct{}
	gaveNext uint64
	settling []settleWait
	givingN  atomic.Int64
}

func newState(s *Store, name string, spec limitstore.Spec) *state {
	tag := "{" + s.cfg.prefix + ":" + name + "}:"
	spec = sanitized(spec)
	st := &state{
		s:        s,
		name:     name,
		spec:     spec,
		local:    scaled(spec, s.cfg.localShare),
		bucket:   []string{tag + "g", tag + "hz"},
		slotKeys: []string{tag + "s", tag + "sb", tag + "w", tag + "wx"},
		leaseArg: strconv.FormatInt(s.cfg.leaseTTL.Microseconds(), 10),
		slotArgs: [4]any{
			strconv.Itoa(spec.MaxConcurrent), strconv.Itoa(shareOf(spec.MaxConcurrent, spec.BatchShare)),
			strconv.FormatInt(s.cfg.leaseTTL.Milliseconds(), 10),
			strconv.FormatInt(s.waiterTTL.Milliseconds(), 10),
		},
	}
	a := argsOf(spec)
	st.args.Store(&a)
	return st
}

// scaled returns spec with every rate, burst and the concurrency bound times share.
func scaled(spec limitstore.Spec, share float64) limitstore.Spec {
	if share == 1 {
		return spec
	}
	for _, r := range []*limitstore.Rate{&spec.Requests, &spec.Tokens, &spec.DailyRequests, &spec.DailyTokens} {
		if r.PerSecond > 0 {
			r.PerSecond *= share
			r.Burst = max(1, r.Burst*share)
		}
	}
	if spec.MaxConcurrent > 0 {
		spec.MaxConcurrent = shareOf(spec.MaxConcurrent, share)
	}
	return spec
}

// localState is the FailOpen fallback's state of the scope.
func (st *state) localState() limitstore.State { return st.s.local.Open(st.name, st.local) }

// fallback decides what a failed Redis call leads to: the local state to use instead
// (FailOpen), or the error to return (the caller's context error; under FailClosed the
// failure itself, which wraps ErrUnavailable). FailClosed's error does not wrap
// llmclient.ErrRateLimited: the Client's limiter wraps a store's failure in it and keeps
// the failure in the chain, while it would replace an error that already wraps it.
func (st *state) fallback(err error) (limitstore.State, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	if st.s.cfg.mode == FailOpen {
		return st.localState(), nil
	}
	return nil, err
}

// scriptArgs returns the clock and spec arguments, with room for n more.
func (st *state) scriptArgs(n int) []any {
	a := st.args.Load()
	args := make([]any, 1+len(a), 1+len(a)+n)
	args[0] = st.s.clockArg()
	copy(args[1:], a[:])
	return args
}

// laneName is a lane's name in the scripts.
func laneName(l limitstore.Lane) string {
	if l == limitstore.LaneBatch {
		return "b"
	}
	return "m"
}

// Reserve implements limitstore.State. Requests, tokens and the estimate are clamped to
// ±limitstore.MaxBurst before the script runs, which caps each charge as the in-memory
// store does; MaxWait is at most WaitHorizon, and a reservation that would wait longer
// than WaitHorizon is refused. The hold of an InFlight reservation admitted in Redis is
// kept under the store's lease TTL (WithLeaseTTL), renewed by this process until
// AdjustInFlight ends it; one admitted by the FailOpen fallback is held there.
func (st *state) Reserve(ctx context.Context, r limitstore.Reservation) (limitstore.Grant, error) {
	maxWait := int64(-1)
	if r.MaxWait >= 0 {
		maxWait = min(int64(r.MaxWait/time.Microsecond), horizonMicros)
	}
	inFlight := ""
	if r.InFlight && r.Lane == limitstore.LaneMain {
		inFlight = "1"
	}
	args := append(st.scriptArgs(8), laneName(r.Lane), amount(r.Requests), amount(r.Tokens), amount(r.Estimate), maxWait,
		inFlight, known(r.VendorBurst), st.leaseArg)
	v, err := st.s.run(ctx, reserveScript, st.bucket, args...)
	if err == nil {
		if g, ok := grantOf(v, r.Lane); ok {
			if m := heldMember(v); m != "" {
				st.addHold(g.Mark, m)
			}
			return g, nil
		}
		err = st.s.badReply(v)
	}
	l, err := st.fallback(err)
	if l == nil {
		return limitstore.Grant{Levels: limitstore.Unknown}, err
	}
	r.MaxWait = min(r.MaxWait, WaitHorizon)
	return l.Reserve(ctx, r)
}

// grantOf reads the reserve script's reply.
func grantOf(v any, lane limitstore.Lane) (limitstore.Grant, bool) {
	res, ok := v.([]any)
	if !ok || len(res) < 2 {
		return limitstore.Grant{}, false
	}
	admitted, ok1 := res[0].(int64)
	wait, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return limitstore.Grant{}, false
	}
	g := limitstore.Grant{Wait: duration(wait), OK: admitted == 1, Levels: limitstore.Unknown}
	if !g.OK || lane == limitstore.LaneBatch {
		return g, len(res) == 2
	}
	if len(res) != 10 && len(res) != 11 { // 11: with a hold's member (heldMember)
		return limitstore.Grant{}, false
	}
	var f [8]float64
	for i := range f {
		if f[i], ok = count(res[2+i]); !ok {
			return limitstore.Grant{}, false
		}
	}
	g.Mark = int64(f[0])
	g.Levels = limitstore.Levels{Requests: f[1], Tokens: f[2], DailyRequests: f[3], DailyTokens: f[4]}
	g.Totals = limitstore.Totals{Tokens: f[5], Estimate: f[6], Requests: f[7]}
	return g, true
}

// heldMember returns the member in hz of the hold that the reserve script's reply v
// made, "" for none.
func heldMember(v any) string {
	if res, ok := v.([]any); ok && len(res) == 11 {
		m, _ := res[10].(string)
		return m
	}
	return ""
}

// count reads a script's number, sent as a string; "" is unknown (NaN).
func count(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	if s == "" {
		return math.NaN(), true
	}
	x, err := strconv.ParseFloat(s, 64)
	return x, err == nil
}

// Adjust implements limitstore.State. Each amount is clamped to ±limitstore.MaxBurst,
// and the script caps it as the in-memory store does.
func (st *state) Adjust(ctx context.Context, l limitstore.Lane, requests, tokens int) error {
	return st.adjust(ctx, l, requests, tokens, "")
}

// AdjustInFlight implements limitstore.InFlightAdjuster, in one script with the
// adjustment. A mark of a reservation admitted in Redis ends that hold there, all of it,
// if it has not ended (held is not used); this process stops renewing it first, so that
// when Redis cannot be reached the hold ends with its lease, and ends it only once. A mark of a reservation the
// FailOpen fallback admitted ends the hold of held tokens there, where the reservation
// was charged, and the adjustment goes there too.
func (st *state) AdjustInFlight(ctx context.Context, mark int64, held, requests, tokens int) error {
	if mark > 0 && mark < redisMarks {
		if st.s.cfg.mode == FailOpen {
			if a, ok := st.localState().(limitstore.InFlightAdjuster); ok {
				return a.AdjustInFlight(ctx, mark, held, requests, tokens)
			}
		}
		return nil
	}
	return st.adjust(ctx, limitstore.LaneMain, requests, tokens, st.endHold(mark))
}

// adjust is Adjust, ending first on the main lane the hold whose member in hz is hm ("":
// none). When Redis cannot be reached, the adjustment goes to the FailOpen
// fallback, the hold stays in Redis until its lease passes.
func (st *state) adjust(ctx context.Context, l limitstore.Lane, requests, tokens int, hm string) error {
	if requests == 0 && tokens == 0 && hm == "" {
		return nil
	}
	args := append(st.scriptArgs(4), laneName(l), amount(requests), amount(tokens), hm)
	if _, err := st.s.run(ctx, adjustScript, st.bucket, args...); err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		if requests == 0 && tokens == 0 {
			return nil
		}
		return loc.Adjust(ctx, l, requests, tokens)
	}
	return nil
}

// redisMarks is where the marks of reservations admitted in Redis start: the server's
// clock in µs (about 1.7e15 in 2024), far above any count of reservations the local
// fallback hands out. A report is sent to the state that admitted its reservation.
const redisMarks = 1 << 50

// Sync implements limitstore.State. A report about a reservation the FailOpen fallback
// admitted goes to the fallback; one about a reservation admitted in Redis is applied
// there, and while Redis cannot be reached it is dropped (not applied: the next report
// sees its error again) under FailOpen, or fails under FailClosed.
func (st *state) Sync(ctx context.Context, r limitstore.Report) (limitstore.Correction, error) {
	if r.Mark < redisMarks {
		if st.s.cfg.mode == FailOpen {
			return st.localState().Sync(ctx, r)
		}
		return limitstore.Correction{Made: limitstore.Unknown}, nil
	}
	args := st.scriptArgs(17)
	args = append(args, r.Mark)
	for _, l := range [3]limitstore.Levels{r.Predicted, r.Target, r.Reserve} {
		args = append(args, known(l.Requests), known(l.Tokens), known(l.DailyRequests), known(l.DailyTokens))
	}
	args = append(args, known(r.Totals.Tokens), known(r.Totals.Estimate), known(r.Totals.Requests), known(r.Gain))
	v, err := st.s.run(ctx, syncScript, st.bucket, args...)
	if err == nil {
		if c, ok := correctionOf(v); ok {
			return c, nil
		}
		err = st.s.badReply(v)
	}
	if l, err := st.fallback(err); l == nil {
		return limitstore.Correction{Made: limitstore.Unknown}, err
	}
	return limitstore.Correction{Made: limitstore.Unknown}, nil
}

// known formats a count for a script: "" when it is not a finite number.
func known(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return formatFloat(x)
}

// correctionOf reads the sync script's reply.
func correctionOf(v any) (limitstore.Correction, bool) {
	res, ok := v.([]any)
	if !ok || len(res) != 15 {
		return limitstore.Correction{}, false
	}
	if _, ok := res[0].(int64); !ok {
		return limitstore.Correction{}, false
	}
	var f [14]float64
	for i := range f {
		if f[i], ok = count(res[1+i]); !ok {
			return limitstore.Correction{}, false
		}
	}
	return limitstore.Correction{
		Made:    limitstore.Levels{Requests: f[0], Tokens: f[1], DailyRequests: f[2], DailyTokens: f[3]},
		Covered: limitstore.Totals{Tokens: f[4], Estimate: f[5], Requests: f[6]},
		Pending: limitstore.Totals{Tokens: f[7], Estimate: f[8], Requests: f[9]},
		Fit:     limitstore.Fit{Counted: f[10], Estimated: f[11], Noise: f[12], Reports: f[13]},
	}, true
}

// Retune implements limitstore.State: the scope's buckets in Redis take spec's rates
// and bursts for every replica, keeping what they owe (the batch lane keeps the share
// the scope was opened with; spec's MaxConcurrent and BatchShare are ignored). The
// FailOpen fallback is retuned too.
func (st *state) Retune(ctx context.Context, spec limitstore.Spec) error {
	spec = sanitized(spec)
	spec.MaxConcurrent, spec.BatchShare = st.spec.MaxConcurrent, st.spec.BatchShare
	next := argsOf(spec)
	old := st.args.Swap(&next)
	if st.s.cfg.mode == FailOpen {
		_ = st.localState().Retune(ctx, scaled(spec, st.s.cfg.localShare))
	}
	args := make([]any, 0, 1+2*len(next))
	args = append(append(append(args, st.s.clockArg()), old[:]...), next[:]...)
	if _, err := st.s.run(ctx, retuneScript, st.bucket, args...); err != nil {
		if l, err := st.fallback(err); l == nil {
			return err
		}
	}
	return nil
}

// Pause implements limitstore.State: the pause holds for every replica, also for a scope
// without limits. It lasts at most MaxPause.
func (st *state) Pause(ctx context.Context, d time.Duration) error {
	return st.block(ctx, "p", micros(d, pauseMicros), min(d, MaxPause))
}

// Evict implements limitstore.State: the eviction holds for every replica, also for a
// scope without limits. It lasts at most WaitHorizon.
func (st *state) Evict(ctx context.Context, d time.Duration) error {
	return st.block(ctx, "x", micros(d, horizonMicros), min(d, WaitHorizon))
}

// unblockScript ends a scope's pause and eviction.
var unblockScript = redis.NewScript(`redis.call('HDEL', KEYS[1], 'p', 'x')
return 1
`)

// Unblock ends the scope's pause and eviction at once, for every replica (an operator
// restored the key), and in the local state FailOpen falls back to.
func (st *state) Unblock(ctx context.Context) error {
	if loc, ok := st.localState().(interface{ Unblock(context.Context) error }); ok {
		_ = loc.Unblock(ctx)
	}
	if _, err := st.s.run(ctx, unblockScript, st.bucket); err != nil {
		if loc, err := st.fallback(err); loc == nil {
			return err
		}
	}
	return nil
}

func (st *state) block(ctx context.Context, kind string, us int64, d time.Duration) error {
	if us == 0 {
		return nil
	}
	if _, err := st.s.run(ctx, blockScript, st.bucket, st.s.clockArg(), kind, us); err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		if kind == "p" {
			return loc.Pause(ctx, d)
		}
		return loc.Evict(ctx, d)
	}
	return nil
}

// Blocked implements limitstore.State. Each duration is at most WaitHorizon.
func (st *state) Blocked(ctx context.Context) (limitstore.Block, error) {
	v, err := st.s.run(ctx, blockedScript, st.bucket, st.s.clockArg())
	if err == nil {
		if res, ok := v.([]any); ok && len(res) == 2 {
			p, ok1 := res[0].(int64)
			x, ok2 := res[1].(int64)
			if ok1 && ok2 {
				return limitstore.Block{Paused: duration(p), Evicted: duration(x)}, nil
			}
		}
		err = st.s.badReply(v)
	}
	loc, err := st.fallback(err)
	if loc == nil {
		return limitstore.Block{}, err
	}
	return loc.Blocked(ctx)
}

var _ limitstore.State = (*state)(nil)
