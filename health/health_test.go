package health_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/health"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u := health.Upstream{
		Name: "a", Adapter: "openai",
		Breaker:    breaker.Snapshot{State: breaker.HalfOpen, Trips: 2, ProbesInFlight: 1},
		Window:     time.Minute,
		LatencyP50: 1500 * time.Millisecond,
		Keys: []health.Key{
			{Label: "key#1", State: health.KeyReady,
				Tokens:   &health.Level{Limit: 60000, Capacity: 10000, Remaining: -250.5},
				Reported: &health.Reported{At: at, Requests: &health.Level{Limit: 60, Remaining: 7, Reset: 2 * time.Second}}},
			{Label: "key#2", State: health.KeyCooling, Until: at},
		},
	}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"a","adapter":"openai","serving":false,"in_flight":0,"attempts":0,"errors":0,"rate_limited":0,"error_rate":0,` +
		`"keys":[{"label":"key#1","state":"ready","in_flight":0,"tokens":{"limit":60000,"remaining":-250.5,"capacity":10000},` +
		`"reported":{"at":"2026-01-02T03:04:05Z","requests":{"limit":60,"remaining":7,"reset":"2s"}}},` +
		`{"label":"key#2","state":"cooling","until":"2026-01-02T03:04:05Z","in_flight":0}],` +
		`"breaker":{"state":"half-open","successes":0,"failures":0,"slow":0,"consecutive_failures":0,"trips":2,"open_remaining":"0s","probes_in_flight":1},` +
		`"window":"1m0s","latency_p50":"1.5s","latency_p90":"0s","latency_p99":"0s"}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}
