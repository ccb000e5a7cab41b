package llmclient_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Events say when their token counts are the Client's estimate rather than the
// upstream's report (Event.UsageEstimated), for the call and its attempts, one-shot and
// streamed, so that a metric of reported usage can leave estimates out.
func TestEventsMarkEstimatedUsage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      fake.Step
		stream    bool
		estimated bool
	}{
		{"reported", fake.Reply("hi").Usage(10, 2), false, false},
		{"not reported", fake.Reply("hi").ReportUsage(llmclient.Usage{}), false, true},
		{"stream reported", fake.Stream("h", "i").Usage(10, 2), true, false},
		{"stream not reported", fake.Stream("h", "i").ReportUsage(llmclient.Usage{}), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log eventLog
			c := newClient(t, up("a", fake.New(tc.step)), llmclient.WithObserver(log.observe))
			if tc.stream {
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				_, err = readAll(s)
				require.NoError(t, err)
				s.Close()
			} else {
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
			}
			calls, attempts := log.kinds(event.Call), log.kinds(event.Attempt)
			require.Len(t, calls, 1)
			require.Len(t, attempts, 1)
			assert.Positive(t, calls[0].InputTokens)
			assert.Equal(t, tc.estimated, calls[0].UsageEstimated, "call")
			assert.Equal(t, tc.estimated, attempts[0].UsageEstimated, "attempt")
		})
	}
}
