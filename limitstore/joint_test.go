package limitstore

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// opaque hides a State's type: a Joint of it reserves state by state, as on a shared store.
type opaque struct{ State }

// jointOf returns a key's state and two states beside it (token buckets of 1,000,
// refilled at 100 a second), made by store (nil: private), and a Joint of the three,
// wrapped in opaque when apart.
func jointOf(store Store, apart bool) ([3]State, *Joint) {
	key := Spec{Requests: Rate{PerSecond: 1, Burst: 2}, Tokens: Rate{PerSecond: 1e6, Burst: 1e6}, BatchShare: 1}
	part := Spec{Tokens: Rate{PerSecond: 100, Burst: 1000}, BatchShare: 1}
	var st [3]State
	if store != nil {
		st[0] = store.Open("k", key)
	} else {
		st[0] = NewState(key)
	}
	st[1] = OpenBeside(store, map[bool]string{true: "k/in"}[store != nil], part, st[0])
	st[2] = OpenBeside(store, map[bool]string{true: "k/out"}[store != nil], part, st[0])
	if apart {
		return st, NewJoint(opaque{st[0]}, opaque{st[1]}, opaque{st[2]})
	}
	return st, NewJoint(st[0], st[1], st[2])
}

// reserveJoint reserves one request of in and out tokens (10 on the key) within maxWait.
func reserveJoint(t *testing.T, j *Joint, in, out int, maxWait time.Duration) [3]Grant {
	t.Helper()
	sh := [3]Share{{Tokens: 10}, {Tokens: in}, {Tokens: out}}
	wait, err := j.Reserve(t.Context(), &Reservation{Requests: 1, MaxWait: maxWait}, []*Share{&sh[0], &sh[1], &sh[2]})
	if err != nil {
		t.Fatal(err)
	}
	g := [3]Grant{sh[0].Grant, sh[1].Grant, sh[2].Grant}
	for i := range g {
		if g[i].OK && g[i].Wait > wait || !g[i].OK && g[i].Wait != wait {
			t.Fatalf("grant %d: %+v; the Joint's wait %v", i, g[i], wait)
		}
	}
	return g
}

// TestJointAllOrNothing: a Joint admits a request on every state at one time, or, when one
// state's wait exceeds the bound, on none (nothing taken anywhere); in memory and state by
// state.
func TestJointAllOrNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func() Store
		apart bool
	}{{"private", func() Store { return nil }, false}, {"memory store", NewMemory, false}, {"state by state", func() Store { return nil }, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, j := jointOf(c.store(), c.apart)
				if !c.apart && len(j.locks) != 1 || !j.one != c.apart {
					t.Fatalf("%d locks, one step %v", len(j.locks), j.one)
				}
				g := reserveJoint(t, j, 600, 800, 0)
				for i := range g {
					if !g[i].OK || g[i].Wait != 0 {
						t.Fatalf("first: grant %d %+v", i, g[i])
					}
				}
				// 400 input and 200 output tokens left, 1 request: 800 output tokens do not
				// fit at once.
				g = reserveJoint(t, j, 300, 800, 0)
				for i := range g {
					if g[i].OK {
						t.Fatalf("over the output tokens: grant %d admitted", i)
					}
				}
				if want := 6 * time.Second; g[0].Wait != want {
					t.Errorf("refusal's wait %v, want %v", g[0].Wait, want)
				}
				for i, want := range [3]float64{1, 400, 200} {
					r, tok := st[i].(interface{ Levels() (float64, float64) }).Levels()
					if i == 0 && r != want || i > 0 && tok != want {
						t.Errorf("state %d after the refusal: %v requests, %v tokens; want %v", i, r, tok, want)
					}
				}
				// The input tokens and the request the refusal did not take are there.
				if g = reserveJoint(t, j, 400, 200, 0); !g[0].OK || !g[1].OK || !g[2].OK {
					t.Errorf("after the refusal: %+v", g)
				}
			})
		})
	}
}

// TestJointWaitsTheLongest: in memory, each state is charged at the admission time the
// slowest one needs, and every grant says that wait.
func TestJointWaitsTheLongest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, j := jointOf(nil, false)
		reserveJoint(t, j, 1000, 0, -1)
		g := reserveJoint(t, j, 500, 100, -1) // the input tokens in 5s
		for i := range g {
			if !g[i].OK || g[i].Wait != 5*time.Second {
				t.Errorf("grant %d: %+v, want 5s", i, g[i])
			}
		}
		time.Sleep(5 * time.Second)
		_, in := st[1].(interface{ Levels() (float64, float64) }).Levels()
		_, out := st[2].(interface{ Levels() (float64, float64) }).Levels()
		if in != 0 || out != 900 {
			t.Errorf("at the admission time: %v input, %v output tokens; want 0, 900", in, out)
		}
	})
}

// TestOpenBesideSharesTheLock: a state opened beside an in-memory one shares its lock; a
// store's scope opened before keeps its own, and a Joint then takes both locks.
func TestOpenBesideSharesTheLock(t *testing.T) {
	s := NewMemory()
	spec := Spec{Tokens: Rate{PerSecond: 1, Burst: 1}, BatchShare: 1}
	key := s.Open("k", spec)
	old := s.Open("k/in", spec)
	in := OpenBeside(s, "k/in", spec, key)
	out := OpenBeside(s, "k/out", spec, key)
	if in != old {
		t.Fatal("OpenBeside did not return the scope opened before")
	}
	if key.(*memState).mu != out.(*memState).mu || key.(*memState).mu == in.(*memState).mu {
		t.Error("locks: want out's shared with the key's, in's its own")
	}
	if j := NewJoint(key, in, out); len(j.locks) != 2 || j.one {
		t.Errorf("joint of three states on two locks: %d locks, one %v", len(j.locks), j.one)
	}
	g := reserveJoint(t, NewJoint(key, in, out), 1, 1, -1)
	if !g[0].OK || !g[1].OK || !g[2].OK {
		t.Errorf("reservation on two locks: %+v", g)
	}
}

// opaqueHeld is opaque for a state that holds in-flight charges.
type opaqueHeld struct{ State }

func (o opaqueHeld) AdjustInFlight(ctx context.Context, mark int64, held, requests, tokens int) error {
	return o.State.(InFlightAdjuster).AdjustInFlight(ctx, mark, held, requests, tokens)
}

// TestJointHoldsInFlight: a Joint holds a share marked InFlight as a Reservation's
// (TestInFlightChargeLosesRefillAtTheVendorsBurst), in one step and state by state, and
// a refused reservation leaves no hold (state by state, the share taken before the refusal
// is given back with its hold).
func TestJointHoldsInFlight(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func() Store
		apart bool // separate locks
		each  bool // state by state
	}{
		{"one lock", func() Store { return nil }, false, false},
		{"memory store", NewMemory, false, false},
		{"two locks", func() Store { return nil }, true, false},
		{"state by state", func() Store { return nil }, false, true},
	} {
		for _, vc := range []struct {
			vendorBurst float64
			want        float64 // the output level a second after the charge
		}{{0, 4}, {13, 7}} {
			t.Run(fmt.Sprintf("%s/vendor burst %v", c.name, vc.vendorBurst), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					store := c.store()
					name := map[bool]string{true: "k"}[store != nil]
					keySpec := Spec{Requests: Rate{PerSecond: 1, Burst: 1}, BatchShare: 1}
					outSpec := Spec{Tokens: Rate{PerSecond: 10, Burst: 10}, BatchShare: 1}
					var key, out State
					switch {
					case c.apart:
						key, out = NewState(keySpec), NewState(outSpec)
					case store != nil:
						key = store.Open(name, keySpec)
						out = OpenBeside(store, name+"/out", outSpec, key)
					default:
						key = NewState(keySpec)
						out = OpenBeside(nil, "", outSpec, key)
					}
					// The output first, so that state by state it is taken before the key
					// refuses.
					j := NewJoint(out, key)
					if c.each {
						j = NewJoint(opaqueHeld{out}, opaque{key})
					}
					if (j.mem == nil) != c.each || j.one != (!c.apart && !c.each) {
						t.Fatalf("in memory %v, one step %v", j.mem != nil, j.one)
					}
					reserve := func(tokens int) [2]Grant {
						t.Helper()
						sh := [2]Share{{Tokens: tokens, InFlight: true, VendorBurst: vc.vendorBurst}, {}}
						if _, err := j.Reserve(t.Context(), &Reservation{Requests: 1, MaxWait: 0}, []*Share{&sh[0], &sh[1]}); err != nil {
							t.Fatal(err)
						}
						return [2]Grant{sh[0].Grant, sh[1].Grant}
					}
					first := reserve(6)
					if !first[0].OK || !first[1].OK {
						t.Fatalf("first: %+v", first)
					}
					// The key has no request left: refused, and nothing stays taken or held.
					if g := reserve(3); g[0].OK || g[1].OK {
						t.Fatalf("second, over the key's requests: %+v", g)
					}
					level := func() float64 { _, tok := out.(*memState).Levels(); return tok }
					time.Sleep(time.Second)
					if tok := level(); tok != vc.want {
						t.Fatalf("output level %v a second after the charge, want %v", tok, vc.want)
					}
					// The request ends, the vendor counted what was charged.
					if err := out.(InFlightAdjuster).AdjustInFlight(t.Context(), first[0].Mark, 6, 0, 0); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Second)
					if tok := level(); tok != 10 {
						t.Fatalf("output level %v a second after the end, want 10", tok)
					}
				})
			})
		}
	}
}
