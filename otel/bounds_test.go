package otel_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/fake"
)

// longModel is a model name of n bytes that differs from the others by i within its first
// bytes, with a multi-byte rune where the clamp falls.
func longModel(i, n int) string {
	head := fmt.Sprintf("model-%04d-", i) + strings.Repeat("é", llmotel.MaxValueLen)
	return head + strings.Repeat("x", n-len(head))
}

// Model names come from callers (a gateway passes its clients' names on): each attribute
// value and span name is cut to MaxValueLen bytes, at a rune boundary, and what the
// Telemetry and the SDK keep after 120 calls with distinct 512 KiB names stays small. It
// used to keep every name whole, in its cache of attribute sets and in the metric SDK's
// (over 60 MB here).
func TestLongAttributeValuesAreClamped(t *testing.T) {
	r := newRig(t)
	up := fake.New(fake.Reply("hi").Usage(3, 1).Forever())
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: up}))
	call := func(i int) {
		model := longModel(i, 512<<10)
		_, err := c.Complete(context.Background(), chatReq(model))
		require.NoError(t, err)
		for _, s := range r.spans.GetSpans() {
			require.LessOrEqual(t, len(s.Name), len("chat ")+llmotel.MaxValueLen, "span name")
			for _, kv := range s.Attributes {
				v := kv.Value.Emit()
				require.LessOrEqual(t, len(v), llmotel.MaxValueLen, "%s", kv.Key)
				require.True(t, utf8.ValidString(v), "%s cut inside a rune", kv.Key)
			}
		}
		r.spans.Reset()
		up.Reset() // the fake keeps a record of each request
	}
	call(-1) // the Client's and the SDK's first-use allocations
	r.collect(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 120 {
		call(i)
	}
	ms := r.collect(t) // the SDK keeps each set it aggregated
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("kept %d bytes after 120 calls with distinct 512 KiB model names", kept)
	require.Less(t, kept, int64(16<<20), "bytes kept after 120 calls with distinct 512 KiB model names")
	dur := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
	require.Len(t, dur, 121, "each name keeps its own set: names differ within the clamp")
	for _, p := range dur {
		m, _ := p.Attributes.Value("gen_ai.request.model")
		require.LessOrEqual(t, len(m.AsString()), llmotel.MaxValueLen)
		require.True(t, strings.HasSuffix(m.AsString(), "…"), "a cut value ends with an ellipsis")
	}
	runtime.KeepAlive(c)
}

// BenchmarkNewModelNames: a call with a model name not seen before, as a gateway sees
// them. The cost of a new name must not grow with the names already seen.
func BenchmarkNewModelNames(b *testing.B) {
	for _, n := range []int{32, 64 << 10} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			tel, err := llmotel.New()
			require.NoError(b, err)
			c, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
				llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("hi").Forever())}))
			require.NoError(b, err)
			names := make([]string, min(b.N, 4000))
			for i := range names {
				names[i] = fmt.Sprintf("m-%06d-", i) + strings.Repeat("x", max(n-9, 0))
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.Complete(ctx, chatReq(names[i%len(names)])); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A call whose model no upstream serves, and an attempt the vendor answers "model not
// found", carry no gen_ai.request.model: the names callers invent add no series. Known
// models keep theirs.
func TestUnknownModelNamesAddNoSeries(t *testing.T) {
	r := newRig(t)
	known := fake.New(fake.Reply("hi").Usage(3, 1).Forever())
	unknown := fake.New(fake.Fail(404).Forever())
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: known, Models: map[string]string{"gpt-4o": "gpt-4o"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: unknown, Models: map[string]string{"vendor-forgot": "vendor-forgot"}}))
	for i := range 50 {
		_, err := c.Complete(context.Background(), chatReq(fmt.Sprintf("invented-%d", i)))
		require.Error(t, err)
	}
	_, err := c.Complete(context.Background(), chatReq("vendor-forgot"))
	require.Error(t, err)
	_, err = c.Complete(context.Background(), chatReq("gpt-4o"))
	require.NoError(t, err)
	ms := r.collect(t)
	models := map[string]bool{}
	for _, p := range wrapHF(histF(t, ms, "gen_ai.client.operation.duration")) {
		m, _ := p.Attributes.Value("gen_ai.request.model")
		models[m.AsString()] = true
	}
	require.Equal(t, map[string]bool{"": true, "gpt-4o": true}, models)
}
