package redisstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAdmission measures one admission's latency through the in-memory store and
// through Redis on loopback: the buckets alone (Reserve), a reservation held in flight and
// its end (Reserve with InFlight, then AdjustInFlight), and the whole admission of a key
// with a concurrency bound, as the Client's limiter makes it (AcquireSlot, Reserve,
// ReleaseSlot). It reports the p50 and p99 latencies and, on Redis, the server's own time
// per script call (INFO commandstats: the time Redis spent running the scripts, which the
// round trip and the client do not blur).
//
//	cd redisstore && go test -run '^$' -bench Admission -benchtime 20000x
func BenchmarkAdmission(b *testing.B) {
	spec := limitstore.Spec{
		Requests:      limitstore.Rate{PerSecond: 1e9, Burst: 1e9},
		Tokens:        limitstore.Rate{PerSecond: 1e12, Burst: 1e12},
		MaxConcurrent: 1 << 20,
		BatchShare:    1,
	}
	srv := startRedis(b)
	admin := srv.client()
	stores := []struct {
		name  string
		state limitstore.State
	}{
		{"memory", limitstore.NewMemory().Open("bench", spec)},
		{"redis", srv.store().Open("bench", spec)},
	}
	r := limitstore.Reservation{Requests: 1, Tokens: 500, MaxWait: -1}
	held := r
	held.InFlight = true
	ops := []struct {
		name string
		do   func(context.Context, limitstore.State) error
	}{
		{"reserve", func(ctx context.Context, st limitstore.State) error {
			_, _, err := reserveWait(st, ctx, r)
			return err
		}},
		{"reserve-held+end", func(ctx context.Context, st limitstore.State) error {
			g, err := st.Reserve(ctx, held)
			if err != nil {
				return err
			}
			return endHold(ctx, st, g, held.Tokens, 0, 0)
		}},
		{"slot+reserve+release", func(ctx context.Context, st limitstore.State) error {
			l, _, err := st.AcquireSlot(ctx, false, -1)
			if err != nil {
				return err
			}
			_, _, err = reserveWait(st, ctx, r)
			st.ReleaseSlot(l)
			return err
		}},
	}
	for _, op := range ops {
		for _, s := range stores {
			b.Run(op.name+"/"+s.name, func(b *testing.B) {
				ctx := context.Background()
				lat := make([]time.Duration, 0, b.N)
				calls0, us0 := scriptStats(b, admin)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					if err := op.do(ctx, s.state); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
				if calls, us := scriptStats(b, admin); s.name == "redis" && calls > calls0 {
					b.ReportMetric((us-us0)/(calls-calls0), "server-µs/script")
				}
			})
		}
	}
}

// scriptStats returns the scripts' calls and the µs Redis spent in them so far (EVALSHA
// and EVAL together: go-redis sends EVAL after a NOSCRIPT).
func scriptStats(b *testing.B, rdb *redis.Client) (calls, us float64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, kv := range strings.Split(line[strings.IndexByte(line, ':')+1:], ",") {
			k, v, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				us += x
			}
		}
	}
	return calls, us
}

// endHold ends the hold of g's reservation of held tokens (AdjustInFlight).
func endHold(ctx context.Context, st limitstore.State, g limitstore.Grant, held, requests, tokens int) error {
	return st.(limitstore.InFlightAdjuster).AdjustInFlight(ctx, g.Mark, held, requests, tokens)
}
