package llmclient

import (
	"math"
	"testing"

	"github.com/llmclient/llmclient/limitstore"
)

// TestTokenReserveFollowsTheChargesNoise: once the charges are calibrated, a token
// bucket's reserve settles at three standard deviations of the pending charges' error
// when that is more than minMargin of the bucket, and at minMargin (1%) when the error is
// smaller, as it is for an estimate close to the upstream's count. The reserve is quota
// a saturated key leaves unused, so it must not stay at a fixed 5%.
func TestTokenReserveFollowsTheChargesNoise(t *testing.T) {
	const burst, pending = 60_000.0, 15_000.0
	settle := func(noise float64) float64 {
		s := &headerSync{margin: syncMargin}
		s.applied.Tokens = limitstore.Rate{PerSecond: burst / 6, Burst: burst}
		s.fit = limitstore.Fit{Counted: 40, Estimated: 40, Noise: noise, Reports: 40}
		s.pending = limitstore.Totals{Tokens: pending, Estimate: pending, Requests: 3}
		for range 200 {
			s.margin = s.marginLocked()
		}
		return s.margin
	}
	// The noise of a calibrated estimate in the overload simulation: three standard
	// deviations of 15,000 pending tokens are about 220 tokens, 0.4% of the bucket.
	if got := settle(0.35); math.Abs(got-minMargin) > 1e-4 || got >= 0.05 {
		t.Errorf("reserve %.4f of the bucket for a small noise, want the floor %.2f", got, minMargin)
	}
	// A noisy estimate: three standard deviations are 3.9% of the bucket.
	noise := 40.0
	want := marginSigmas * math.Sqrt(noise*pending) / burst
	if got := settle(noise); math.Abs(got-want) > 1e-4 {
		t.Errorf("reserve %.4f of the bucket for a large noise, want %.4f (three standard deviations)", got, want)
	}
	// The expected shortfall of charges made under a smaller multiplier adds to it.
	s := &headerSync{margin: syncMargin}
	s.applied.Tokens = limitstore.Rate{PerSecond: burst / 6, Burst: burst}
	s.fit = limitstore.Fit{Counted: 44, Estimated: 40, Noise: 0.35, Reports: 40}
	s.pending = limitstore.Totals{Tokens: pending, Estimate: pending, Requests: 3}
	for range 200 {
		s.margin = s.marginLocked()
	}
	want = (0.1*pending + marginSigmas*math.Sqrt(0.35*pending)) / burst
	if math.Abs(s.margin-want) > 1e-4 {
		t.Errorf("reserve %.4f of the bucket with a 10%% shortfall pending, want %.4f", s.margin, want)
	}
}
