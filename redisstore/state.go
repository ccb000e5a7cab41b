package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
)

// state is one scope's LimitState in Redis. It holds only what it derives from the
// scope's name and limits, and the ids of the slot leases this process holds there.
type state struct {
	s        *Store
	name     string
	spec     llmclient.LimitSpec
	local    llmclient.LimitSpec // the FailOpen fallback's limits
	bucket   []string            // the buckets' hash
	slotKeys []string            // s, sb, w, wx
	// main and batch are each lane's request interval (µs), request burst, token interval
	// (µs) and token burst, as script arguments (boxed once: no allocation per call).
	main, batch [4]any
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

func newState(s *Store, name string, spec llmclient.LimitSpec) *state {
	tag := "{" + s.cfg.prefix + ":" + name + "}:"
	share := spec.BatchShare
	if !(share > 0 && share <= 1) {
		share = 1
	}
	batchSlots := max(1, int(float64(spec.MaxConcurrent)*share))
	st := &state{
		s:        s,
		name:     name,
		spec:     spec,
		local:    scaled(spec, s.cfg.localShare),
		bucket:   []string{tag + "g"},
		slotKeys: []string{tag + "s", tag + "sb", tag + "w", tag + "wx"},
		main:     laneArgs(spec, 1),
		batch:    laneArgs(spec, share),
		slotArgs: [4]any{
			strconv.Itoa(spec.MaxConcurrent), strconv.Itoa(batchSlots),
			strconv.FormatInt(s.cfg.leaseTTL.Milliseconds(), 10),
			strconv.FormatInt(s.waiterTTL.Milliseconds(), 10),
		},
	}
	return st
}

// laneArgs returns a lane's bucket arguments: each bucket's interval in µs per unit and
// its burst, both times share; "0" for a bucket without a limit.
func laneArgs(spec llmclient.LimitSpec, share float64) [4]any {
	var a [4]any
	for i, r := range [2]llmclient.Rate{spec.Requests, spec.Tokens} {
		a[2*i], a[2*i+1] = "0", "0"
		if r.PerSecond > 0 {
			a[2*i] = formatFloat(1e6 / (r.PerSecond * share))
			a[2*i+1] = formatFloat(r.Burst * share)
		}
	}
	return a
}

// scaled returns spec with every rate, burst and the concurrency bound times share.
func scaled(spec llmclient.LimitSpec, share float64) llmclient.LimitSpec {
	if share == 1 {
		return spec
	}
	for _, r := range []*llmclient.Rate{&spec.Requests, &spec.Tokens} {
		if r.PerSecond > 0 {
			r.PerSecond *= share
			r.Burst = max(1, r.Burst*share)
		}
	}
	if spec.MaxConcurrent > 0 {
		spec.MaxConcurrent = max(1, int(float64(spec.MaxConcurrent)*share))
	}
	return spec
}

func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// micros converts d to whole microseconds, rounded up.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// fallback decides what a failed Redis call leads to: the local state to use instead
// (FailOpen), or the error to return (the caller's context error; under FailClosed the
// failure itself, which wraps ErrUnavailable). FailClosed's error does not wrap
// llmclient.ErrRateLimited: the Client's limiter wraps a store's failure in it and keeps
// the failure in the chain, while it would replace an error that already wraps it.
func (st *state) fallback(err error) (llmclient.LimitState, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	if st.s.cfg.mode == FailOpen {
		return st.s.local.Open(st.name, st.local), nil
	}
	return nil, err
}

// Reserve implements llmclient.LimitState.
func (st *state) Reserve(ctx context.Context, r llmclient.Reservation) (time.Duration, bool, error) {
	lane, args := "m", &st.main
	if r.Lane == llmclient.LaneBatch {
		lane, args = "b", &st.batch
	}
	maxWait := int64(-1)
	if r.MaxWait >= 0 {
		maxWait = int64(r.MaxWait / time.Microsecond)
	}
	v, err := st.s.run(ctx, reserveScript, st.bucket, lane, r.Requests, max(r.Tokens, 0), maxWait,
		args[0], args[1], args[2], args[3])
	if err != nil {
		l, err := st.fallback(err)
		if l == nil {
			return 0, false, err
		}
		return l.Reserve(ctx, r)
	}
	res, ok := v.([]any)
	if !ok || len(res) != 2 {
		return 0, false, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	admitted, _ := res[0].(int64)
	wait, _ := res[1].(int64)
	return time.Duration(wait) * time.Microsecond, admitted == 1, nil
}

// Adjust implements llmclient.LimitState.
func (st *state) Adjust(ctx context.Context, l llmclient.Lane, requests, tokens int) error {
	if requests == 0 && tokens == 0 {
		return nil
	}
	lane, args := "m", &st.main
	if l == llmclient.LaneBatch {
		lane, args = "b", &st.batch
	}
	_, err := st.s.run(ctx, adjustScript, st.bucket, lane, requests, tokens, args[0], args[2])
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		return loc.Adjust(ctx, l, requests, tokens)
	}
	return nil
}

// Sync implements llmclient.LimitState.
func (st *state) Sync(ctx context.Context, requests, tokens int64) error {
	if requests < 0 && tokens < 0 {
		return nil
	}
	a := &st.main
	_, err := st.s.run(ctx, syncScript, st.bucket, requests, tokens, a[0], a[1], a[2], a[3])
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		return loc.Sync(ctx, requests, tokens)
	}
	return nil
}

// Pause implements llmclient.LimitState: the pause holds for every replica.
func (st *state) Pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := st.s.run(ctx, pauseScript, st.bucket, micros(d))
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return err
		}
		return loc.Pause(ctx, d)
	}
	return nil
}

// PauseLeft implements llmclient.LimitState.
func (st *state) PauseLeft(ctx context.Context) (time.Duration, error) {
	v, err := st.s.run(ctx, pauseLeftScript, st.bucket)
	if err != nil {
		loc, err := st.fallback(err)
		if loc == nil {
			return 0, err
		}
		return loc.PauseLeft(ctx)
	}
	left, _ := v.(int64)
	return time.Duration(max(left, 0)) * time.Microsecond, nil
}

var _ llmclient.LimitState = (*state)(nil)
