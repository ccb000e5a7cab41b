package llmclient_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestWithQueueTargetValidation: a negative queue target, or one over an hour, is
// refused by New with a message that names it; 0 (off) and 100ms are accepted.
func TestWithQueueTargetValidation(t *testing.T) {
	up := llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(), Limits: llmclient.Limits{TPM: 1000}})
	for _, d := range []time.Duration{-1, 2 * time.Hour, time.Duration(1<<63 - 1)} {
		if _, err := llmclient.New(up, llmclient.WithQueueTarget(d)); err == nil || !strings.Contains(err.Error(), "queue target") {
			t.Errorf("WithQueueTarget(%v): err %v, want one naming the queue target", d, err)
		}
	}
	for _, d := range []time.Duration{0, 100 * time.Millisecond} {
		if _, err := llmclient.New(up, llmclient.WithQueueTarget(d)); err != nil {
			t.Errorf("WithQueueTarget(%v): %v", d, err)
		}
	}
}
