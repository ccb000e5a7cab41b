package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// BenchmarkAdmission measures one admission's latency through the in-memory store and
// through Redis on loopback: the buckets alone (Reserve), and the whole admission of a
// key with a concurrency bound, as the Client's limiter makes it (AcquireSlot, Reserve,
// ReleaseSlot). It reports the p50 and p99 latencies.
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
	stores := []struct {
		name  string
		state limitstore.State
	}{
		{"memory", limitstore.NewMemory().Open("bench", spec)},
		{"redis", srv.store().Open("bench", spec)},
	}
	r := limitstore.Reservation{Requests: 1, Tokens: 500, MaxWait: -1}
	ops := []struct {
		name string
		do   func(context.Context, limitstore.State) error
	}{
		{"reserve", func(ctx context.Context, st limitstore.State) error {
			_, _, err := reserveWait(st, ctx, r)
			return err
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
			})
		}
	}
}
