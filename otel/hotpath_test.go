package otel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// The attribute sets and span starts the last call used serve the next call only when it
// is alike: calls that alternate models, parameters and outcomes are each recorded with
// their own attributes.
func TestAlternatingCallsKeepTheirAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		c := r.client(t, llmclient.WithBackoff(time.Second, time.Second), llmclient.WithUpstream(llmclient.Upstream{Name: "a",
			Provider: fake.New(fake.Reply("hi").Times(6),
				fake.Fail(500), fake.Reply("hi").Times(2), fake.Fail(500), fake.Fail(502), fake.Reply("hi").Forever())}))
		at := func(v float64) *float64 { return &v }
		reqs := []*llmclient.Request{chatReq("m1"), chatReq("m2"), chatReq("m1"), chatReq("m1"), chatReq("m1"), chatReq("m1")}
		reqs[2].Temperature = at(0.5)
		reqs[3].Temperature = at(0.7)
		reqs[4].Temperature, reqs[4].TopP = at(0.7), at(0.9)
		reqs[5].MaxTokens = 10
		// In the second round, the first call's first attempt fails with a 500, the third
		// call's first two attempts with a 500 and a 502.
		for range 2 {

			for _, req := range reqs {
				_, err := c.Complete(context.Background(), req)
				require.NoError(t, err)
			}
		}

		m1 := r.named("chat m1")
		require.Len(t, m1, 10)
		for i, s := range m1 {
			a := attrs(s.Attributes)
			want := map[string]any{}
			switch i % 5 {
			case 1:
				want["gen_ai.request.temperature"] = 0.5
			case 2:
				want["gen_ai.request.temperature"] = 0.7
			case 3:
				want["gen_ai.request.temperature"], want["gen_ai.request.top_p"] = 0.7, 0.9
			case 4:
				want["gen_ai.request.max_tokens"] = int64(10)
			}
			for _, k := range []string{"gen_ai.request.temperature", "gen_ai.request.top_p", "gen_ai.request.max_tokens"} {
				assert.Equal(t, want[k], a[k], "call %d: %s", i, k)
			}
			assert.Equal(t, "m1", a["gen_ai.request.model"])
		}
		require.Len(t, r.named("chat m2"), 2)

		ms := r.collect(t)
		att := wrapI(sumI(t, ms, "llmclient.client.attempts"))
		for _, w := range []struct {
			model  string
			status int64
			n      int64
		}{{"m1", 200, 10}, {"m2", 200, 2}, {"m1", 500, 2}, {"m1", 502, 1}} {
			got := matching(att, map[string]any{"gen_ai.request.model": w.model, "http.response.status_code": w.status})
			require.Len(t, got, 1, "%s %d", w.model, w.status)
			assert.Equal(t, w.n, got[0].Value, "%s %d", w.model, w.status)
		}
		dur := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
		for model, n := range map[string]uint64{"m1": 10, "m2": 2} {
			got := matching(dur, map[string]any{"gen_ai.request.model": model, "gen_ai.response.model": model})
			require.Len(t, got, 1, model)
			assert.Equal(t, n, got[0].Count, model)
		}
	})
}
