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
// its end (Reserve with InFlight, then AdjustInFlight; alone, and beside 100 other holds
// as on a busy key), and the whole admission of a key
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
	holdAndEnd := func(ctx context.Context, st limitstore.State) error {
		g, err := st.Reserve(ctx, held)
		if err != nil {
			return err
		}
		return endHold(ctx, st, g, held.Tokens, 0, 0)
	}
	// heldBeside holds 100 reservations in flight beside the benchmark's, as a busy key's
	// calls do, and returns what ends them.
	heldBeside := func(b *testing.B, st limitstore.State) func() {
		gs := make([]limitstore.Grant, 100)
		for i := range gs {
			var err error
			if gs[i], err = st.Reserve(context.Background(), held); err != nil {
				b.Fatal(err)
			}
		}
		return func() {
			for _, g := range gs {
				if err := endHold(context.Background(), st, g, held.Tokens, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	ops := []struct {
		name  string
		setup func(*testing.B, limitstore.State) func()
		do    func(context.Context, limitstore.State) error
	}{
		{"reserve", nil, func(ctx context.Context, st limitstore.State) error {
			_, _, err := reserveWait(st, ctx, r)
			return err
		}},
		{"reserve-held+end", nil, holdAndEnd},
		{"reserve-held+end-100-in-flight", heldBeside, holdAndEnd},
		{"slot+reserve+release", nil, func(ctx context.Context, st limitstore.State) error {
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
				if op.setup != nil {
					defer op.setup(b, s.state)()
				}
				lat := make([]time.Duration, 0, b.N)
				calls0, us0, cmds0 := scriptStats(b, admin)
				cpu0 := serverCPU(b, admin)
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
				if calls, us, cmds := scriptStats(b, admin); s.name == "redis" && calls > calls0 {
					b.ReportMetric((us-us0)/(calls-calls0), "server-µs/script")
					b.ReportMetric((cmds-cmds0)/(calls-calls0), "cmds/script")
					b.ReportMetric((serverCPU(b, admin)-cpu0)*1e6/(calls-calls0), "server-cpu-µs/script")
				}
			})
		}
	}
}

// scriptStats returns the scripts' calls and the µs Redis spent in them so far (EVALSHA
// and EVAL together: go-redis sends EVAL after a NOSCRIPT), and the calls of the commands
// the scripts ran (every other command but INFO and the connection's handshake): how much
// each script does, which the machine's load does not change.
func scriptStats(b *testing.B, rdb *redis.Client) (calls, us, cmds float64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch name {
			case "cmdstat_evalsha", "cmdstat_eval":
				switch k {
				case "calls":
					calls += x
				case "usec":
					us += x
				}
			case "cmdstat_info", "cmdstat_hello", "cmdstat_client|setinfo", "cmdstat_ping", "cmdstat_script|load":
			default:
				if k == "calls" {
					cmds += x
				}
			}
		}
	}
	return calls, us, cmds
}

// serverCPU returns the CPU seconds the Redis server has used (INFO cpu, user and
// system): per script call, what a script costs the server with its round trip, which a
// loaded machine stretches less than the time the server measures around each script.
func serverCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			x, _ := strconv.ParseFloat(v, 64)
			sec += x
		}
	}
	return sec
}

// endHold ends the hold of g's reservation of held tokens (AdjustInFlight).
func endHold(ctx context.Context, st limitstore.State, g limitstore.Grant, held, requests, tokens int) error {
	return st.(limitstore.InFlightAdjuster).AdjustInFlight(ctx, g.Mark, held, requests, tokens)
}
