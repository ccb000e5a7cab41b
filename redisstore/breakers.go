package redisstore

import (
	"context"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// Shared breaker state (limitstore.Breakers, llmclient.WithSharedBreakers): one key per
// upstream, "{prefix:breaker:<upstream>}", holding "1" with the open period as its TTL.
// A trip only ever lengthens the TTL; a reset deletes the key. Without the key nobody has
// tripped the breaker, or the period ended.

// maxBreakerOpen bounds a recorded open period, so that a huge duration cannot overflow
// the milliseconds Redis is given or lock an upstream out for years.
const maxBreakerOpen = 24 * time.Hour

var tripScript = redis.NewScript(`
local ms = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
end
return 1
`)

var breakerOpenScript = redis.NewScript(`return redis.call('PTTL', KEYS[1])`)

var breakerResetScript = redis.NewScript(`return redis.call('DEL', KEYS[1])`)

var _ limitstore.Breakers = (*Store)(nil)

func (s *Store) breakerKey(name string) string {
	return "{" + s.cfg.prefix + ":breaker:" + name + "}"
}

// TripBreaker implements limitstore.Breakers: it records that name's breaker is open for d
// (at least a millisecond, at most a day), keeping a longer period already recorded.
// When Redis cannot be reached it returns an error wrapping ErrUnavailable and the trip
// is not recorded.
func (s *Store) TripBreaker(ctx context.Context, name string, d time.Duration) error {
	ms := min(max(d, time.Millisecond), maxBreakerOpen).Milliseconds()
	_, err := s.run(ctx, tripScript, []string{s.breakerKey(name)}, ms)
	return err
}

// BreakerOpen implements limitstore.Breakers. When Redis cannot be reached it returns an
// error wrapping ErrUnavailable; the Client then lets the local breaker decide.
func (s *Store) BreakerOpen(ctx context.Context, name string) (time.Duration, error) {
	v, err := s.run(ctx, breakerOpenScript, []string{s.breakerKey(name)})
	if err != nil {
		return 0, err
	}
	ms, ok := v.(int64)
	if !ok {
		return 0, s.badReply(v)
	}
	if ms <= 0 { // -2: no trip recorded; -1 cannot happen (every trip has a TTL)
		return 0, nil
	}
	return time.Duration(min(ms, maxBreakerOpen.Milliseconds())) * time.Millisecond, nil
}

// ResetBreaker implements limitstore.Breakers.
func (s *Store) ResetBreaker(ctx context.Context, name string) error {
	_, err := s.run(ctx, breakerResetScript, []string{s.breakerKey(name)})
	return err
}
