package redisstore

import (
	"context"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// Scripts are the store's scripts by name, for the black-box tests that feed them
// arguments no Store would send.
var Scripts = map[string]*redis.Script{
	"reserve": reserveScript, "adjust": adjustScript, "sync": syncScript, "retune": retuneScript,
	"block": blockScript, "blocked": blockedScript, "slot": slotScript, "renew": renewScript,
	"holdRenew": holdRenewScript,
}

// WithClock makes the bucket scripts compute with clock instead of the server's TIME, for
// a test in virtual time; the clock must lie between 2005 and 2255.
func WithClock(clock func() time.Time) Option {
	return optionFunc(func(c *config) { c.clock = clock })
}

// Holds returns how many in-flight holds s renews for the named scope.
func Holds(s *Store, name string) int {
	s.busyMu.Lock()
	states := make([]*state, 0, len(s.busy))
	for st := range s.busy {
		states = append(states, st)
	}
	s.busyMu.Unlock()
	n := 0
	for _, st := range states {
		if st.name == name {
			st.mu.Lock()
			n += len(st.holds)
			st.mu.Unlock()
		}
	}
	return n
}

// LocalTokens returns what the token bucket of st's FailOpen fallback holds now.
func LocalTokens(st limitstore.State) float64 {
	_, tok := st.(*state).localState().(interface{ Levels() (float64, float64) }).Levels()
	return tok
}

// RenewAround runs one renewal of st's slot leases and in-flight holds, running between
// after the renewal took the list of what st holds and before it reaches Redis.
func RenewAround(st limitstore.State, between func()) {
	s := st.(*state)
	renew, holds, _ := s.work(s.s.cfg.leaseTTL)
	between()
	ctx := context.Background()
	if len(renew) > 1 {
		s.renewSlots(ctx, renew)
	}
	if holds != nil {
		s.renewHolds(ctx, holds)
	}
}

// PendingSettles returns how many settles l, a ledger of this package, holds queued for
// Redis.
func PendingSettles(l limitstore.Ledger) int {
	lg := l.(*ledger)
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.pending)
}
