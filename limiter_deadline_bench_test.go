package llmclient

import (
	"context"
	"testing"
	"time"
)

// BenchmarkLimiterAdmissionDeadline is BenchmarkLimiterAdmission's rpm+tpm/serial for a
// request with a deadline, which reads the upstream's expected service time and, with
// a size margin, bounds its wait by the deadline (the caller's clock reading given, as
// the Client gives it).
func BenchmarkLimiterAdmissionDeadline(b *testing.B) {
	const lots = 1 << 40
	cfg := defaultLimiterConfig()
	l := newKeyLimiter(Limits{RPM: lots, TPM: lots}, &cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var svc serviceTimes
	var ls limitLease
	b.ReportAllocs()
	for b.Loop() {
		adm := admission{out: 1500, within: -1, svc: &svc, svcOut: 1500, now: time.Now()}
		if _, err := l.acquireInto(ctx, &adm, &ls); err != nil {
			b.Fatal(err)
		}
		ls.release(1200, true)
	}
}
