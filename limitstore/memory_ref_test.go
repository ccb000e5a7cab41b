package limitstore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// Reference steps of a reservation, one state at a time and one lane at a time, that
// TestReservationMatchesReference compares the in-memory states' reservations with.

func (s *memState) refReadyLocked(l Lane, now, req, tok float64, inFlight bool) float64 {
	if l == LaneBatch {
		b := &s.gate
		at := fmax(now, b[1].ready(now, tok))
		if req > 0 {
			at = fmax(at, b[0].ready(now, req))
		}
		return at
	}
	if inFlight {
		s.settleHeld(now)
	}
	m := &s.main
	at := fmax(fmax(now, s.pausedUntil), m[bTok].ready(now, tok))
	if req > 0 {
		at = fmax(at, m[bReq].ready(now, req))
	}
	if s.daily {
		at = fmax(at, m[bDayTok].ready(now, tok))
		if req > 0 {
			at = fmax(at, m[bDayReq].ready(now, req))
		}
	}
	return at
}

func (s *memState) refGrantLocked(l Lane, at, req, tok, est float64, inFlight bool, vendorBurst float64, g *Grant) {
	if l == LaneBatch {
		b := &s.gate
		if req > 0 {
			b[0].charge(at, req)
		}
		if tok > 0 {
			b[1].charge(at, tok)
		}
		*g = Grant{OK: true, Levels: Unknown}
		return
	}
	m := &s.main
	g.OK = true
	if req > 0 {
		m[bReq].charge(at, req)
	}
	if tok > 0 {
		m[bTok].charge(at, tok)
	}
	if inFlight {
		s.hold(tok, vendorBurst)
	}
	t := &s.totals
	t.Tokens += m[bTok].cap(tok)
	t.Estimate += fmin(est, MaxBurst)
	t.Requests += m[bReq].cap(req)
	g.Totals = *t
	s.mark++
	g.Mark = s.mark
	g.Levels.Requests, g.Levels.Tokens = m[bReq].predict(at), m[bTok].predict(at)
	if s.daily {
		if req > 0 {
			m[bDayReq].charge(at, req)
		}
		if tok > 0 {
			m[bDayTok].charge(at, tok)
		}
		g.Levels.DailyRequests, g.Levels.DailyTokens = m[bDayReq].predict(at), m[bDayTok].predict(at)
	} else {
		g.Levels.DailyRequests, g.Levels.DailyTokens = math.NaN(), math.NaN()
	}
}

// refReserveOne is a Joint's Reserve on states in memory sharing one lock and one clock,
// and a state's own Reserve (one state), as written with the reference steps.
func refReserveOne(mem []*memState, r *Reservation, shares []*Share) time.Duration {
	req := count(r.Requests)
	now := mem[0].clock(r.At)
	at := now
	for i, s := range mem {
		at = fmax(at, s.refReadyLocked(r.Lane, now, req, count(shares[i].Tokens), shares[i].InFlight))
	}
	wait := Duration(at - now)
	if r.MaxWait >= 0 && wait > r.MaxWait {
		refuse(shares, wait)
		return wait
	}
	for i, s := range mem {
		sh := shares[i]
		s.refGrantLocked(r.Lane, at, req, count(sh.Tokens), refEstimate(sh), sh.InFlight, sh.VendorBurst, &sh.Grant)
		sh.Grant.Wait = wait
	}
	return wait
}

// refEstimate is the share's estimate for the totals: its Estimate when positive, else
// its tokens.
func refEstimate(sh *Share) float64 {
	if sh.Estimate > 0 {
		return float64(sh.Estimate)
	}
	return count(sh.Tokens)
}

// refReserveApart is a Joint's Reserve on states in memory that keep their own locks and
// clocks, as written with the reference steps.
func refReserveApart(mem []*memState, r *Reservation, shares []*Share) time.Duration {
	req := count(r.Requests)
	t := r.At
	if t.IsZero() {
		t = time.Now()
	}
	var wait float64
	for i, s := range mem {
		now := s.clock(t)
		wait = fmax(wait, s.refReadyLocked(r.Lane, now, req, count(shares[i].Tokens), shares[i].InFlight)-now)
	}
	w := Duration(wait)
	if r.MaxWait >= 0 && w > r.MaxWait {
		refuse(shares, w)
		return w
	}
	for i, s := range mem {
		sh := shares[i]
		s.refGrantLocked(r.Lane, s.clock(t)+wait, req, count(sh.Tokens), refEstimate(sh), sh.InFlight, sh.VendorBurst, &sh.Grant)
		sh.Grant.Wait = w
	}
	return w
}

// stateOf is what a differential test compares of a state: everything a reservation
// reads or writes, NaNs included (%v prints every float so that it reads back exactly).
func stateOf(s *memState) string {
	return fmt.Sprintf("%+v %+v held=%v room=%v paused=%v mark=%v totals=%+v daily=%v",
		s.main, s.gate, s.held, s.room, s.pausedUntil, s.mark, s.totals, s.daily)
}

// TestReservationMatchesReference: a key's state and two states beside it (or apart, each
// with its own lock), reserved together (Joint) and alone (Reserve), on either lane, with or without a hold in flight,
// a caller's clock reading, a bound on the wait, daily buckets, pauses, adjustments and
// retuning in between, end in the same states with the same grants as the reference
// steps, bit for bit.
func TestReservationMatchesReference(t *testing.T) {
	for _, apart := range []bool{false, true} {
		for seed := range int64(8) {
			t.Run(fmt.Sprint(map[bool]string{false: "beside", true: "apart"}[apart], seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { checkAgainstReference(t, seed, apart) })
			})
		}
	}
}

func checkAgainstReference(t *testing.T, seed int64, apart bool) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	key := Spec{Requests: Rate{PerSecond: 2, Burst: 5}, Tokens: Rate{PerSecond: 500, Burst: 4000}, BatchShare: 0.5}
	part := Spec{Tokens: Rate{PerSecond: 200, Burst: 3000}, BatchShare: 0.5}
	daily := part
	daily.DailyTokens = Rate{PerSecond: 50, Burst: 8000}
	var sets [2][3]*memState // [0]: reserved by the code under test, [1]: the reference
	var joint *Joint
	for k := range sets {
		st0 := NewState(key)
		st1 := OpenBeside(nil, "", part, st0)
		st2 := OpenBeside(nil, "", part, st0)
		if apart {
			st1, st2 = NewState(part), NewState(part)
		}
		sets[k] = [3]*memState{st0.(*memState), st1.(*memState), st2.(*memState)}
		if k == 0 {
			joint = NewJoint(st0, st1, st2)
		}
	}
	if joint.one == apart || len(joint.locks) != map[bool]int{false: 1, true: 3}[apart] {
		t.Fatalf("apart %v: one step %v, %d locks", apart, joint.one, len(joint.locks))
	}
	ctx := t.Context()
	for step := range 400 {
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		r := Reservation{Lane: LaneMain, Requests: rng.IntN(3), MaxWait: -1}
		if rng.IntN(4) == 0 {
			r.Lane = LaneBatch
		}
		switch rng.IntN(4) {
		case 0:
			r.MaxWait = 0
		case 1:
			r.MaxWait = time.Duration(rng.IntN(20)) * time.Second
		}
		if rng.IntN(2) == 0 {
			r.At = time.Now().Add(-time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		tokens := func() int { return rng.IntN(5000) - 200 }
		var grants [2][3]Grant
		var waits [2]time.Duration
		switch op := rng.IntN(10); {
		case op < 5: // the three together
			shares := [3]Share{{Tokens: tokens(), Estimate: rng.IntN(3000)}, {Tokens: tokens()}, {Tokens: tokens()}}
			if rng.IntN(2) == 0 {
				shares[2].InFlight, shares[2].VendorBurst = true, float64(rng.IntN(6000))
			}
			for k := range sets {
				sh := shares
				ptrs := []*Share{&sh[0], &sh[1], &sh[2]}
				if k == 0 {
					w, err := joint.Reserve(ctx, &r, ptrs)
					if err != nil {
						t.Fatal(err)
					}
					waits[k] = w
				} else if apart {
					waits[k] = refReserveApart(sets[k][:], &r, ptrs)
				} else {
					waits[k] = refReserveOne(sets[k][:], &r, ptrs)
				}
				for i := range sh {
					grants[k][i] = sh[i].Grant
				}
			}
		case op < 8: // one alone
			i := rng.IntN(3)
			r.Tokens, r.Estimate = tokens(), rng.IntN(3000)
			if i == 2 && rng.IntN(2) == 0 {
				r.InFlight, r.VendorBurst = true, float64(rng.IntN(6000))
			}
			for k := range sets {
				if k == 0 {
					if err := sets[k][i].ReserveTo(ctx, &r, &grants[k][i]); err != nil {
						t.Fatal(err)
					}
				} else {
					sh := Share{Tokens: r.Tokens, Estimate: r.Estimate, InFlight: r.InFlight, VendorBurst: r.VendorBurst}
					refReserveOne(sets[k][i:i+1], &r, []*Share{&sh})
					grants[k][i] = sh.Grant
				}
			}
		case op == 8: // an adjustment, a hold ended, a pause
			i, n, h, req := rng.IntN(3), rng.IntN(4000)-2000, rng.IntN(3000), rng.IntN(3)-1
			for k := range sets {
				s := sets[k][i]
				switch step % 3 {
				case 0:
					_ = s.Adjust(ctx, r.Lane, req, n)
				case 1:
					_ = s.AdjustInFlight(ctx, 0, h, 0, n)
				default:
					_ = s.Pause(ctx, time.Duration(h)*time.Millisecond)
				}
			}
		default: // daily buckets on a part, or not
			sp := part
			if rng.IntN(2) == 0 {
				sp = daily
			}
			for k := range sets {
				_ = sets[k][1].Retune(ctx, sp)
			}
		}
		if waits[0] != waits[1] {
			t.Fatalf("step %d: wait %v, reference %v", step, waits[0], waits[1])
		}
		for i := range 3 {
			if g, ref := fmt.Sprintf("%+v", grants[0][i]), fmt.Sprintf("%+v", grants[1][i]); g != ref {
				t.Fatalf("step %d, state %d: grant\n%s\nreference\n%s", step, i, g, ref)
			}
			if s, ref := stateOf(sets[0][i]), stateOf(sets[1][i]); s != ref {
				t.Fatalf("step %d, state %d:\n%s\nreference\n%s", step, i, s, ref)
			}
		}
	}
}
