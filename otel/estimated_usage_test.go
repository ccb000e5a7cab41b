package otel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/fake"
)

// A stream closed before its usage has token counts that are the Client's estimate: its
// span marks them llmclient.usage_estimated, and gen_ai.client.token.usage leaves them
// out unless WithEstimatedUsage(true). A stream read to its reported usage is recorded
// and not marked.
func TestEstimatedUsageIsMarkedAndOptIn(t *testing.T) {
	for _, tc := range []struct {
		name            string
		closeEarly, opt bool
		marked, metric  bool
	}{
		{"reported", false, false, false, true},
		{"estimated", true, false, true, false},
		{"estimated, opted in", true, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, llmotel.WithEstimatedUsage(tc.opt))
				p := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Usage(1000, 500))
				c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				if tc.closeEarly {
					require.True(t, s.Next())
				} else {
					for s.Next() {
					}
					require.NoError(t, s.Err())
				}
				s.Close()
				a := attrs(r.one(t, "chat m").Attributes)
				require.NotNil(t, a["gen_ai.usage.input_tokens"])
				_, marked := a["llmclient.usage_estimated"]
				assert.Equal(t, tc.marked, marked, "span marked")
				_, recorded := r.collect(t)["gen_ai.client.token.usage"]
				assert.Equal(t, tc.metric, recorded, "token usage recorded")
			})
		})
	}
}
