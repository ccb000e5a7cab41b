package llmclient

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/ratelimit"
)

// BenchmarkLimiterAdmission measures admission + release when capacity is available: the
// cost the limiter adds to every call (in place, into the attempt's lease, as the Client
// admits).
func BenchmarkLimiterAdmission(b *testing.B) {
	const lots = 1 << 40
	for _, tc := range []struct {
		name string
		l    Limits
		prio ratelimit.Priority
	}{
		{"rpm+tpm", Limits{RPM: lots, TPM: lots}, ratelimit.Interactive},
		{"rpm+tpm+concurrency", Limits{RPM: lots, TPM: lots, MaxConcurrent: 1 << 20}, ratelimit.Interactive},
		{"rpm+tpm+concurrency/batch", Limits{RPM: lots, TPM: lots, MaxConcurrent: 1 << 20}, ratelimit.Batch},
		// Input and output tokens apart: each a part of its own (limiter_quantity.go).
		{"rpm+itpm+otpm", Limits{RPM: lots, ITPM: lots, OTPM: lots}, ratelimit.Interactive},
		{"rpm+tpm+itpm+otpm", Limits{RPM: lots, TPM: lots, ITPM: lots, OTPM: lots}, ratelimit.Interactive},
	} {
		cfg := defaultLimiterConfig()
		ctx := context.Background()
		b.Run(tc.name+"/serial", func(b *testing.B) {
			l := newKeyLimiter(tc.l, &cfg)
			adm := admission{out: 1500, prio: tc.prio, within: -1}
			var ls limitLease
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.acquireInto(ctx, &adm, &ls); err != nil {
					b.Fatal(err)
				}
				ls.release(1200, true)
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			l := newKeyLimiter(tc.l, &cfg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				adm := admission{out: 1500, prio: tc.prio, within: -1}
				var ls limitLease
				for pb.Next() {
					if _, err := l.acquireInto(ctx, &adm, &ls); err != nil {
						b.Fatal(err)
					}
					ls.release(1200, true)
				}
			})
		})
	}
	// After a report of the upstream's headers: the charge is multiplied by the fitted
	// ratio (one more atomic load and a multiplication).
	b.Run("rpm+tpm/synced/serial", func(b *testing.B) {
		cfg := defaultLimiterConfig()
		l := newKeyLimiter(Limits{RPM: lots, TPM: lots}, &cfg)
		ctx := context.Background()
		for range 5 {
			ls, _, err := l.acquire(ctx, 1500, ratelimit.Interactive)
			if err != nil {
				b.Fatal(err)
			}
			l.observe(&ratelimit.Status{Tokens: ratelimit.Window{Known: true, Remaining: lots}}, &ls, true) // agrees
			ls.release(0, true)
		}
		adm := admission{out: 1500, within: -1}
		var ls limitLease
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.acquireInto(ctx, &adm, &ls); err != nil {
				b.Fatal(err)
			}
			ls.release(1200, true)
		}
	})
	b.Run("partition/parallel", func(b *testing.B) {
		cfg := defaultConfig()
		WithPartitionLimits("tenant", Limits{RPM: lots, TPM: lots}).apply(&cfg)
		p := newPartitionLimiter(&cfg.limiter)
		req := &Request{Metadata: map[string]string{"tenant": "acme"}}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var ls limitLease
			for pb.Next() {
				_, err := p.acquireInto(context.Background(), p.cfg.partitionOf(context.Background(), req), req, 1500, &ls)
				if err != nil {
					b.Fatal(err)
				}
				ls.release(1200, true)
			}
		})
	})
}

// BenchmarkLimiterCost measures the per-call estimate of a chat request of the English
// corpus (about 4 KB) with a short system message.
func BenchmarkLimiterCost(b *testing.B) {
	text, err := os.ReadFile(filepath.Join("testdata", "corpus", "english.txt"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := defaultLimiterConfig()
	req := &Request{Model: "gpt-4o", Messages: []Message{
		SystemMessage("You are a helpful assistant."), UserMessage(string(text)),
	}}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		cfg.cost(req)
	}
}

// BenchmarkHeuristicEstimator measures the heuristic's throughput on each corpus.
func BenchmarkHeuristicEstimator(b *testing.B) {
	for _, name := range []string{"english", "chinese", "code_go", "json", "chat"} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", name+".txt"))
		if err != nil {
			b.Fatal(err)
		}
		texts := []string{string(data)}
		if name == "chat" {
			texts = strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		}
		for _, model := range []string{"gpt-4o", "gpt-4"} {
			b.Run(name+"/"+estimate.EncodingForModel(model), func(b *testing.B) {
				h := estimate.Heuristic{}
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					for _, t := range texts {
						h.CountTokens(model, t)
					}
				}
			})
		}
	}
}
