package rediscache_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandLog records the commands a go-redis client sends, as Redis receives them.
type commandLog struct {
	mu   sync.Mutex
	cmds [][]any
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.cmds = append(l.cmds, cmd.Args())
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// expiry returns the expiry in milliseconds of the last SET sent (go-redis sends a whole
// number of seconds as EX), or -1.
func (l *commandLog) expiry() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.cmds) - 1; i >= 0; i-- {
		c := l.cmds[i]
		if len(c) != 5 || !strings.EqualFold(fmt.Sprint(c[0]), "set") {
			continue
		}
		n, _ := c[4].(int64)
		switch fmt.Sprint(c[3]) {
		case "px":
			return n
		case "ex":
			return n * 1000
		}
	}
	return -1
}

// Set keeps an entry at least its TTL: a TTL that is not a whole number of milliseconds
// is rounded up, never down (an entry with a TTL of 1.4 ms was kept 1 ms), and a huge one
// does not wrap around.
func TestSetRoundsTheTTLUp(t *testing.T) {
	srv := startRedis(t)
	st, rdb := srv.store()
	var log commandLog
	rdb.AddHook(&log)
	for _, tc := range []struct {
		ttl  time.Duration
		want int64 // milliseconds
	}{
		{time.Nanosecond, 1},
		{1400 * time.Microsecond, 2},
		{1500 * time.Microsecond, 2},
		{2 * time.Millisecond, 2},
		{time.Hour, 3_600_000},
		{time.Hour + time.Nanosecond, 3_600_001},
		// The longest Duration is a fraction of a millisecond past a whole one; rounding it
		// up would pass the longest Duration, so it is kept a fraction short.
		{time.Duration(math.MaxInt64), math.MaxInt64 / int64(time.Millisecond)},
	} {
		require.NoError(t, st.Set(ctx(t), "k", entry("hello"), tc.ttl), tc.ttl)
		assert.Equal(t, tc.want, log.expiry(), "TTL %v", tc.ttl)
		if tc.ttl >= time.Hour {
			e, err := st.Get(ctx(t), "k")
			require.NoError(t, err)
			assert.NotNil(t, e, "stored for %v", tc.ttl)
		}
	}
}
