package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// countingUpstream answers every request with the one-shot body and counts them.
func countingUpstream(t *testing.T, n *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(oneShot)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A paired step drives both lanes on one schedule and gives each lane the results of
// its own requests only.
func TestPairedStepKeepsEachLanesResults(t *testing.T) {
	var nTarget, nDirect atomic.Int64
	gw := &target{name: "gw", url: countingUpstream(t, &nTarget).URL + "/v1", stopped: map[bool]bool{}}
	direct := &target{name: "direct", url: countingUpstream(t, &nDirect).URL + "/v1", stopped: map[bool]bool{}}

	const rate, warm, dur = 200, 20 * time.Millisecond, 100 * time.Millisecond
	rs, err := step([]*target{gw, direct}, false, rate, warm, dur, 5*time.Second, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Target != "gw" || rs[1].Target != "direct" {
		t.Fatalf("results %+v, want one for gw then one for direct", rs)
	}
	interval := time.Second / rate
	wantMeasured, wantSent := int(dur/interval), int64(int(warm/interval)+int(dur/interval))
	for i, r := range rs {
		if r.Sent != wantMeasured || r.OK != wantMeasured || r.Errors != 0 {
			t.Errorf("lane %d: sent %d ok %d errors %d (first %q), want %d answered", i, r.Sent, r.OK, r.Errors, r.FirstError, wantMeasured)
		}
		if r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("lane %d: p50 %v p99 %v", i, r.P50, r.P99)
		}
	}
	if nTarget.Load() != wantSent || nDirect.Load() != wantSent {
		t.Errorf("requests seen: target %d, direct %d; want %d each (warm-up included)", nTarget.Load(), nDirect.Load(), wantSent)
	}
}

func TestParseTarget(t *testing.T) {
	tg, err := parseTarget("gw=http://127.0.0.1:1/v1/,pid=42,header=Authorization: Bearer k")
	if err != nil || tg.name != "gw" || tg.url != "http://127.0.0.1:1/v1" || tg.pid != 42 ||
		len(tg.headers) != 1 || tg.headers[0] != [2]string{"Authorization", "Bearer k"} {
		t.Fatalf("parseTarget: %+v, %v", tg, err)
	}
	for _, bad := range []string{"nourl", "gw=u,pid=0", "gw=u,pid=-1", "gw=u,pid=x", "gw=u,header=nocolon", "gw=u,what=1"} {
		if _, err := parseTarget(bad); err == nil {
			t.Errorf("parseTarget(%q) accepted", bad)
		}
	}
}
