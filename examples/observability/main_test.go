package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo's scrape has every metric and label the README's alarms use (the section on
// metrics still to come excepted, whose names must not exist yet), and its snapshot is
// JSON.
func TestREADMEMetricsExist(t *testing.T) {
	d, err := newDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	d.traffic(context.Background(), 300)
	scrape := d.scrape()

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	now, later, ok := strings.Cut(string(readme), "### Alarms on metrics still to come")
	if !ok {
		t.Fatal("README has no section on metrics still to come")
	}
	name := regexp.MustCompile(`\b(?:llmclient|gen_ai)_[a-z0-9_]+\b`)
	names := map[string]bool{}
	for _, n := range name.FindAllString(now, -1) {
		names[n] = true
	}
	if len(names) < 15 {
		t.Fatalf("only %d names found in the README: %v", len(names), names)
	}
	for n := range names {
		if !strings.Contains(scrape, n) {
			t.Errorf("the README uses %s, which the scrape lacks", n)
		}
	}
	for _, n := range name.FindAllString(later, -1) {
		if names[n] {
			continue // also used above, and checked there
		}
		if strings.Contains(scrape, n) {
			t.Errorf("the README calls %s a metric still to come, but the scrape has it", n)
		}
	}
	for _, series := range []string{`error_type="rate_limited"`, `error_type="server_error"`, `error_type="auth"`,
		`llmclient_reason="limiter"`, `llmclient_limit_dimension="tokens"`, `llmclient_breaker_state="open"`,
		`llmclient_key_state="evicted"`, `gen_ai_provider_name="openai"`,
		`llmclient_cache_result="hit"`, `llmclient_cache_result="miss"`, `llmclient_cache_name="responses"`} {
		if !strings.Contains(scrape, series) {
			t.Errorf("the scrape lacks %s", series)
		}
	}
	for _, secret := range []string{"sk-demo", revokedKey} {
		if strings.Contains(scrape, secret) {
			t.Errorf("the scrape holds a key: %s", secret)
		}
	}

	s := d.client.Snapshot()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Upstreams) != 2 || s.Upstreams[0].Attempts == 0 || s.Upstreams[0].Keys[2].State != health.KeyEvicted {
		t.Errorf("snapshot: %s", data)
	}
	if len(s.Caches) != 1 || s.Caches[0].Name != "responses" || s.Caches[0].Hits == 0 || s.Caches[0].Entries == 0 {
		t.Errorf("snapshot caches: %+v", s.Caches)
	}
	if strings.Contains(string(data), "sk-demo") {
		t.Error("the snapshot holds a key")
	}
}

func TestFilterMetrics(t *testing.T) {
	in := "# HELP go_gc x\ngo_gc 1\n# HELP llmclient_a y\n# TYPE llmclient_a counter\nllmclient_a_total 2\n" +
		"gen_ai_b_bucket{le=\"1\"} 3\ngen_ai_b_sum 4\n"
	want := "# HELP llmclient_a y\n# TYPE llmclient_a counter\nllmclient_a_total 2\ngen_ai_b_sum 4\n"
	if got := filterMetrics(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
