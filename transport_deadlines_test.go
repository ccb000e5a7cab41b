package llmclient

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The shared timer's heap cancels exactly the entries whose deadline has passed, with
// their own cause, whatever the order they were added and removed in; removed entries
// are never canceled, and what remains is armed for the earliest deadline left.
func TestDeadlinesExpireExactlyThePassedOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	base := time.Now().Add(time.Hour) // the real timer, armed for these deadlines, never fires during the test
	for round := range 200 {
		var d deadlines
		n := 1 + rng.IntN(40)
		entries := make([]*deadline, n)
		causes := make([]error, n)
		canceled := make([]error, n)
		for i := range entries {
			causes[i] = errors.New("cause")
			entries[i] = &deadline{at: base.Add(time.Duration(rng.IntN(1000)) * time.Second), cause: causes[i]}
			entries[i].cancel = func(err error) { canceled[i] = err }
			d.add(entries[i])
		}
		removed := make([]bool, n)
		for i := range entries {
			if rng.IntN(3) == 0 {
				removed[i] = true
				if d.remove(entries[i]) {
					t.Fatalf("round %d: entry %d reported fired before any expiry", round, i)
				}
			}
		}
		now := base.Add(time.Duration(rng.IntN(1000)) * time.Second)
		d.expire(now)
		var left []time.Time
		for i, e := range entries {
			due := !removed[i] && !e.at.After(now)
			if got := canceled[i] != nil; got != due {
				t.Fatalf("round %d: entry %d (at %v, now %v, removed %v) canceled %v, want %v",
					round, i, e.at.Sub(base), now.Sub(base), removed[i], got, due)
			}
			if due && canceled[i] != causes[i] {
				t.Fatalf("round %d: entry %d canceled with %v, not its cause", round, i, canceled[i])
			}
			if !removed[i] && !due {
				left = append(left, e.at)
				if d.remove(e) {
					t.Fatalf("round %d: entry %d not due but reported fired", round, i)
				}
				d.add(e) // back in, for the armed check below
			} else if !removed[i] && !d.remove(e) {
				t.Fatalf("round %d: entry %d due but not reported fired", round, i)
			}
		}
		if len(left) == 0 {
			if !d.armed.IsZero() && len(d.heap) != 0 {
				t.Fatalf("round %d: nothing left, heap %d", round, len(d.heap))
			}
		} else if want := slices.MinFunc(left, func(a, b time.Time) int { return a.Compare(b) }); !d.armed.Equal(want) {
			t.Fatalf("round %d: armed at %v, want the earliest deadline left %v", round, d.armed.Sub(base), want.Sub(base))
		}
		if d.timer != nil {
			d.timer.Stop()
		}
	}
}

// An attempt's clock without a monotonic reading (a synctest bubble's) is not the shared
// timer's.
func TestUsesSharedOnlyOnTheRealClock(t *testing.T) {
	if !usesShared(time.Now()) {
		t.Fatal("the real clock's time does not use the shared timer")
	}
	if usesShared(time.Now().Round(0)) {
		t.Fatal("a time without a monotonic reading uses the shared timer")
	}
}

// New pooled calls take the timer's shards in turn, and a pooled call keeps its shard when
// it is recycled, so that goroutines each reusing their own pooled call take different
// locks.
func TestPooledCallsKeepTheirShard(t *testing.T) {
	a, b := txRuns.New().(*txRun), txRuns.New().(*txRun)
	if a.x.shard == b.x.shard {
		t.Fatalf("two new pooled calls share shard %d", a.x.shard)
	}
	shard := a.x.shard
	a.x.deadline.at = time.Now() // something the recycling clears
	a.release()
	if a.x.shard != shard || !a.x.deadline.at.IsZero() {
		t.Fatalf("recycled: shard %d (want %d), deadline %v (want cleared)", a.x.shard, shard, a.x.deadline.at)
	}
}
