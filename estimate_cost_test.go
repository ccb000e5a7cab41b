package llmclient

import (
	"strings"
	"testing"

	"github.com/llmclient/llmclient/ratelimit"
)

func TestLimiterCostRatiosAndReservedOutput(t *testing.T) {
	ones := estimatorFunc(func(_, text string) int { return len(text) })
	req := func(model string, maxTokens int) *Request {
		return &Request{Model: model, MaxTokens: maxTokens, Messages: []Message{UserMessage(strings.Repeat("x", 93))}}
	}
	// The prompt is 3 + 4 + 93 = 100 tokens.
	for _, tc := range []struct {
		name  string
		opts  []Option
		model string
		max   int
		want  int
	}{
		{"default reserved output", nil, "gpt-4o", 0, 100 + defaultReservedOutput},
		{"max tokens", nil, "gpt-4o", 50, 150},
		{"reserved output option", []Option{WithReservedOutput(10)}, "gpt-4o", 0, 110},
		{"claude ratio", nil, "claude-sonnet-4-5", 50, 125 + 50},
		{"gemini ratio", nil, "gemini-2.5-flash", 50, 115 + 50},
		{"user ratio overrides", []Option{WithTokenRatio("claude", 1.5)}, "claude-opus-4", 50, 150 + 50},
		{"longest match wins", []Option{WithTokenRatio("claude", 1.5), WithTokenRatio("claude-haiku", 2)}, "claude-haiku-4", 50, 200 + 50},
		{"later wins a tie", []Option{WithTokenRatio("my", 2), WithTokenRatio("my", 3)}, "my-model", 50, 300 + 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			WithEstimator(ones).apply(&cfg)
			for _, o := range tc.opts {
				o.apply(&cfg)
			}
			if err := cfg.limiter.validate(); err != nil {
				t.Fatal(err)
			}
			if got := cfg.limiter.cost(req(tc.model, tc.max)); got != tc.want {
				t.Fatalf("cost = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLimiterEnabledOnlyWithTokenLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want bool
	}{
		{"none", []Option{WithUpstream(Upstream{Name: "a", Limits: Limits{RPM: 10, MaxConcurrent: 2}})}, false},
		{"upstream TPM", []Option{WithUpstream(Upstream{Name: "a", Limits: Limits{TPM: 10}})}, true},
		{"partition TPM", []Option{WithPartitionLimits("t", Limits{TPM: 10})}, true},
		{"override TPM", []Option{WithPartitionOverride("x", Limits{TPM: 10})}, true},
	} {
		cfg := defaultConfig()
		for _, o := range tc.opts {
			o.apply(&cfg)
		}
		if got := cfg.limiter.enabled(&cfg); got != tc.want {
			t.Errorf("%s: enabled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLimitsAndLimiterConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"zero", Limits{}, true},
		{"all", Limits{RPM: 60, TPM: 1000, MaxConcurrent: 3, RequestBurst: 60, TokenBurst: 1000, Metering: ratelimit.MeterUsage}, true},
		{"negative", Limits{RPM: -1}, false},
		{"burst above quota", Limits{RPM: 10, RequestBurst: 11}, false},
		{"burst without quota", Limits{TokenBurst: 5}, false},
		{"unknown metering", Limits{Metering: 9}, false},
	} {
		if err := tc.l.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate() = %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"reserved output", WithReservedOutput(0)},
		{"ratio", WithTokenRatio("x", 0)},
		{"mode", WithLimiterMode(7)},
		{"max wait", WithMaxWait(-1)},
		{"batch share zero", WithBatchShare(0)},
		{"batch share above one", WithBatchShare(1.5)},
		{"burst fraction", WithBurstFraction(2)},
		{"partition limits", WithPartitionLimits("t", Limits{TPM: -1})},
		{"partition override name", WithPartitionOverride("", Limits{})},
	} {
		cfg := defaultConfig()
		tc.opt.apply(&cfg)
		if err := cfg.limiter.validate(); err == nil {
			t.Errorf("%s: invalid option accepted", tc.name)
		}
	}
	cfg := defaultConfig()
	if err := cfg.limiter.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// estimatorFunc adapts a function to the Estimator interface, for tests.
type estimatorFunc func(model, text string) int

func (f estimatorFunc) CountTokens(model, text string) int { return f(model, text) }
