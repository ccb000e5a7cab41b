package llmgateway

import (
	"net/http/httptest"
	"testing"
	"time"
)

// A profile or trace answers after its ?seconds: its write deadline counts from then.
func TestAdminRunTimeOfProfiles(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{"/admin/snapshot", 0},
		{"/admin/snapshot?seconds=90", 0},
		{"/debug/pprof/profile?seconds=90", 90 * time.Second},
		{"/debug/pprof/profile", 30 * time.Second},
		{"/debug/pprof/trace?seconds=2.5", 2500 * time.Millisecond},
		{"/debug/pprof/trace?seconds=-1", time.Second},
		{"/debug/pprof/heap", time.Second},
		{"/debug/pprof/heap?seconds=1e300", 24 * time.Hour},
	} {
		if got := adminRunTime(httptest.NewRequest("GET", tc.url, nil)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.url, got, tc.want)
		}
	}
}
