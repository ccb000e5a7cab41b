package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// state is one scope's LimitState in Redis. It holds only what it derives from the
// scope's name and limits, and the ids of the slot leases this process holds there.
type state struct {
	s        *Store
	name     string
	spec     limitstore.Spec // sanitized (clamp.go)
	local    limitstore.Spec // the FailOpen fallback's limits
	bucket   []string        // the buckets' hash
	slotKeys []string        // s, sb, w, wx
	// main and batch are the lanes in Redis; localMain and localBatch the fallback's
	// buckets, to clamp what is passed on to it.
	main, batch           lane
	localMain, localBatch [2]bucket
	// slotArgs are the slot script's arguments after op and member: max slots, max batch
	// slots, lease TTL (ms), waiter TTL (ms).
	slotArgs [4]any

	mu sync.Mutex
	// held are the Redis leases this process holds, renewed in the background: id → batch.
	held map[uint64]bool
	// unreleased are leases given back while Redis could not be reached, released again
	// once it answers, unless they have expired by then.
	unreleased map[uint64]unreleased
}

// lane is one lane's request and token buckets, and their script arguments: each
// bucket's interval in µs per unit and its burst ("0" for no limit), formatted once.
type lane struct {
	name string // "m" or "b"
	b    [2]bucket
	args [4]any
}

func newLane(name string, spec limitstore.Spec, share float64) lane {
	l := lane{name: name, b: [2]bucket{newBucket(spec.Requests, share), newBucket(spec.Tokens, share)}}
	for i, b := range l.b {
		l.args[2*i], l.args[2*i+1] = "0", "0"
		if b.interval > 0 {
			l.args[2*i], l.args[2*i+1] = formatFloat(b.interval), formatFloat(b.burst)
		}
	}
	return l
}

func newState(s *Store, name string, spec limitstore.Spec) *state {
	tag := "{" + s.cfg.prefix + ":" + name + "}:"
	spec = sanitized(spec)
	local := scaled(spec, s.cfg.localShare)
	st := &state{
		s:          s,
		name:       name,
		spec:       spec,
		local:      local,
		bucket:     []string{tag + "g"},
		slotKeys:   []string{tag + "s", tag + "sb", tag + "w", tag + "wx"},
		main:       newLane("m", spec, 1),
		batch:      newLane("b", spec, spec.BatchShare),
		localMain:  [2]bucket{newBucket(local.Requests, 1), newBucket(local.Tokens, 1)},
		localBatch: [2]bucket{newBucket(local.Requests, local.BatchShare), newBucket(local.Tokens, local.BatchShare)},
		slotArgs: [4]any{
			strconv.Itoa(spec.MaxConcurrent), strconv.Itoa(shareOf(spec.MaxConcurrent, spec.BatchShare)),
			strconv.FormatInt(s.cfg.leaseTTL.Milliseconds(), 10),
			strconv.FormatInt(s.waiterTTL.Milliseconds(), 10),
		},
	}
	return st
}

// scaled returns spec with every rate, burst and the concurrency bound times share.
func scaled(spec limitstore.Spec, share float64) limitstore.Spec {
	if share == 1 {
		return spec
	}
	for _, r := range []*limitstore.Rate{&spec.Requests, &spec.Tokens} {
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

// lanes returns the lane l names in Redis and in the fallback.
func (st *state) lanes(l limitstore.Lane) (*lane, *[2]bucket) {
	if l == limitstore.LaneBatch {
		return &st.batch, &st.localBatch
	}
	return &st.main, &st.localMain
}

// charge returns n units clamped to a charge of b, at least 0.
func charge(b bucket, n int) float64 { return max(0, b.clamp(float64(n))) }

// clampInt returns n clamped to a charge of b, either way, as an int.
func clampInt(b bucket, n int) int { return int(b.clamp(float64(n))) }

// arg returns x, a clamped amount of units, as a script argument: the int n it came from
// when clamping left it alone (the usual case, which go-redis formats without allocating
// a string), else x formatted.
func arg(x float64, n int) any {
	if x == float64(n) {
		return n
	}
	return formatFloat(x)
}

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
		return st.s.local.Open(st.name, st.local), nil
	}
	return nil, err
}

// Reserve implements limitstore.State. Requests and tokens are clamped to MaxCharge
// of their buckets (negative amounts take nothing), MaxWait to WaitHorizon.
func (st *state) Reserve(ctx context.Context, r limitstore.Reservation) (time.Duration, bool, error) {
	ln, loc := st.lanes(r.Lane)
	maxWait := int64(-1)
	if r.MaxWait >= 0 {
		maxWait = min(int64(r.MaxWait/time.Microsecond), horizonMicros)
	}
	v, err := st.s.run(ctx, reserveScript, st.bucket, ln.name,
		arg(charge(ln.b[0], r.Requests), r.Requests), arg(charge(ln.b[1], r.Tokens), r.Tokens), maxWait,
		ln.args[0], ln.args[1], ln.args[2], ln.args[3])
	if err == nil {
		res, ok := v.([]any)
		if !ok || len(res) != 2 {
			err = st.s.badReply(v)
		} else {
			admitted, _ := res[0].(int64)
			wait, _ := res[1].(int64)
			return duration(wait), admitted == 1, nil
		}
	}
	l, err := st.fallback(err)
	if l == nil {
		return 0, false, err
	}
	r.Requests, r.Tokens = int(charge(loc[0], r.Requests)), int(charge(loc[1], r.Tokens))
	r.MaxWait = min(r.MaxWait, WaitHorizon)
	return l.Reserve(ctx, r)
}

// Adjust implements limitstore.State. Each amount is clamped to MaxCharge of its
// bucket, either way.
func (st *state) Adjust(ctx context.Context, l limitstore.Lane, requests, tokens int) error {
	ln, loc := st.lanes(l)
	req, tok := ln.b[0].clamp(float64(requests)), ln.b[1].clamp(float64(tokens))
	if req == 0 && tok == 0 {
		return nil
	}
	_, err := st.s.run(ctx, adjustScript, st.bucket, ln.name, arg(req, requests), arg(tok, tokens),
		ln.args[0], ln.args[1], ln.args[2], ln.args[3])
	if err != nil {
		loc2, err := st.fallback(err)
		if loc2 == nil {
			return err
		}
		return loc2.Adjust(ctx, l, clampInt(loc[0], requests), clampInt(loc[1], tokens))
	}
	return nil
}

// Sync implements limitstore.State. A remaining amount no smaller than the bucket
// changes nothing and is not sent.
func (st *state) Sync(ctx context.Context, requests, tokens int64) error {
	ln := &st.main
	rem := [2]int64{requests, tokens}
	for i, b := range ln.b {
		if rem[i] < 0 || b.interval == 0 || float64(rem[i]) >= b.burst {
			rem[i] = -1
		}
	}
	if rem[0] < 0 && rem[1] < 0 {
		return nil
	}
	_, err := st.s.run(ctx, syncScript, st.bucket, ln.name, rem[0], rem[1], ln.args[0], ln.args[1], ln.args[2], ln.args[3])
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		return loc.Sync(ctx, requests, tokens)
	}
	return nil
}

// Pause implements limitstore.State: the pause holds for every replica. It lasts at
// most MaxPause.
func (st *state) Pause(ctx context.Context, d time.Duration) error {
	us := micros(d, pauseMicros)
	if us == 0 {
		return nil
	}
	_, err := st.s.run(ctx, pauseScript, st.bucket, "m", us)
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		return loc.Pause(ctx, min(d, MaxPause))
	}
	return nil
}

// PauseLeft implements limitstore.State.
func (st *state) PauseLeft(ctx context.Context) (time.Duration, error) {
	v, err := st.s.run(ctx, pauseLeftScript, st.bucket)
	if err == nil {
		left, ok := v.(int64)
		if ok {
			return duration(left), nil
		}
		err = st.s.badReply(v)
	}
	loc, err := st.fallback(err)
	if loc == nil {
		return 0, err
	}
	return loc.PauseLeft(ctx)
}

var _ limitstore.State = (*state)(nil)
