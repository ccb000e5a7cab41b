package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// unreleased is a lease whose release failed.
type unreleased struct {
	batch bool
	at    time.Time
}

// hold records a Redis lease for renewal.
func (st *state) hold(id uint64, batch bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held == nil {
		st.held = make(map[uint64]bool)
	}
	st.held[id] = batch
	st.trackLocked()
}

// drop stops renewing a lease that is being released, and reports whether this process
// held it: false when it was released before.
func (st *state) drop(id uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.held[id]; !ok {
		return false
	}
	delete(st.held, id)
	st.trackLocked()
	return true
}

// retryRelease records a lease whose release failed, to release it once Redis answers.
func (st *state) retryRelease(lease limitstore.SlotLease) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.unreleased == nil {
		st.unreleased = make(map[uint64]unreleased)
	}
	st.unreleased[lease.ID] = unreleased{batch: lease.Batch, at: time.Now()}
	st.trackLocked()
}

// addHold records an in-flight hold made in Redis, its member in hz, for renewal.
func (st *state) addHold(mark int64, member string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.holds == nil {
		st.holds = make(map[int64]string)
	}
	st.holds[mark] = member
	st.trackLocked()
}

// endHold stops renewing the in-flight hold of the reservation with that mark, and
// returns its member in hz to end it with; "" when this process holds none by that mark
// (it ended already).
func (st *state) endHold(mark int64) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	m, ok := st.holds[mark]
	if ok {
		delete(st.holds, mark)
		st.trackLocked()
	}
	return m
}

// endedHolds returns the members in v (holdRenewScript's reply: the holds it made again)
// of holds this process no longer holds: their calls ended while the renewal was on its
// way, so the renewal made them again after they ended.
func (st *state) endedHolds(v any) []string {
	made, _ := v.([]any)
	if len(made) == 0 {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var ended []string
	for _, m := range made {
		s, _ := m.(string)
		mark, _, _ := strings.Cut(s, ":")
		if n, err := strconv.ParseInt(mark, 10, 64); err != nil || st.holds[n] != s {
			ended = append(ended, s)
		}
	}
	return ended
}

// releasedSlots returns the leases in v (renewScript's reply: the members it took again)
// that this process no longer holds: they were released while the renewal was on its way,
// so the renewal took them again after their release.
func (st *state) releasedSlots(v any) []limitstore.SlotLease {
	made, _ := v.([]any)
	if len(made) == 0 {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var gone []limitstore.SlotLease
	for _, m := range made {
		s, _ := m.(string)
		if s == "" {
			continue
		}
		id, err := strconv.ParseUint(s[1:], 36, 64)
		if err != nil {
			continue
		}
		if _, ok := st.held[id]; !ok {
			gone = append(gone, limitstore.SlotLease{ID: id, Batch: s[0] == 'b'})
		}
	}
	return gone
}

// trackLocked registers st with the store's background work while it has any. st.mu is
// held; the store's lock is taken inside it, never the other way round.
func (st *state) trackLocked() {
	s := st.s
	s.busyMu.Lock()
	if len(st.held)+len(st.unreleased)+len(st.holds) > 0 {
		s.busy[st] = struct{}{}
	} else {
		delete(s.busy, st)
	}
	s.busyMu.Unlock()
}

// work returns the renew script's arguments (the TTL, then the members held), the hold
// renew script's (the clock, the lease, then the holds' members; nil for none) and the
// leases to release again, forgetting those that have expired in Redis anyway.
func (st *state) work(ttl time.Duration) (renew, holds []any, release []limitstore.SlotLease) {
	st.mu.Lock()
	defer st.mu.Unlock()
	renew = make([]any, 1, 1+len(st.held))
	renew[0] = strconv.FormatInt(ttl.Milliseconds(), 10)
	for id, batch := range st.held {
		renew = append(renew, member(id, batch))
	}
	if len(st.holds) > 0 {
		holds = make([]any, 2, 2+len(st.holds))
		holds[0], holds[1] = st.s.clockArg(), st.leaseArg
		for _, m := range st.holds {
			holds = append(holds, m)
		}
	}
	for id, u := range st.unreleased {
		if time.Since(u.at) > ttl {
			delete(st.unreleased, id)
			continue
		}
		release = append(release, limitstore.SlotLease{ID: id, Batch: u.batch})
	}
	st.trackLocked()
	return renew, holds, release
}

// released forgets a lease released again.
func (st *state) released(id uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.unreleased, id)
	st.trackLocked()
}

// renewLoop renews held leases, slots and in-flight holds, every third of the lease TTL,
// and at once when Redis answers again after a failure, until Close. It also retries
// failed releases.
func (s *Store) renewLoop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.renewAll(ctx)
	}
}

func (s *Store) renewAll(ctx context.Context) {
	s.busyMu.Lock()
	states := make([]*state, 0, len(s.busy))
	for st := range s.busy {
		states = append(states, st)
	}
	s.busyMu.Unlock()
	for _, st := range states {
		renew, holds, release := st.work(s.cfg.leaseTTL)
		if len(renew) > 1 {
			st.renewSlots(ctx, renew)
		}
		if holds != nil {
			st.renewHolds(ctx, holds)
		}
		for _, l := range release {
			if st.release(ctx, l) == nil {
				st.released(l.ID)
			}
		}
	}
}

// renewSlots renews the slot leases given by renew (renewScript's arguments from work).
// Those Redis no longer has (it lost them, or their lease passed) are taken again, as
// their calls still run; one released meanwhile is released again. A failure is recorded
// by run; the leases then expire unless renewed in time.
func (st *state) renewSlots(ctx context.Context, renew []any) {
	v, err := st.s.run(ctx, renewScript, st.slotKeys[:2], renew...)
	if err != nil {
		return
	}
	for _, l := range st.releasedSlots(v) {
		if st.release(ctx, l) != nil {
			st.retryRelease(l)
		}
	}
}

// renewHolds renews the in-flight holds given by holds (holdRenewScript's arguments from
// work). Those Redis no longer has are made again, as their calls are still in flight;
// one whose call ended meanwhile is ended again (it ends once, whichever end comes
// first). Should that fail, the hold ends with its lease, as nothing renews it.
func (st *state) renewHolds(ctx context.Context, holds []any) {
	v, err := st.s.run(ctx, holdRenewScript, st.bucket, holds...)
	if err != nil {
		return
	}
	for _, m := range st.endedHolds(v) {
		_ = st.adjust(ctx, limitstore.LaneMain, 0, 0, m)
	}
}
