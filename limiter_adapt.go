package llmclient

import (
	"sync"
	"time"
)

// Processes that share an API key without a shared store each refill their buckets at the
// key's full rate. Lowering the buckets to the upstream's remaining count (observe) removes
// what the others spent, but only at each response; between responses every process spends
// its own refill again. So a key's limiter also adapts its rates to the upstream's view,
// additively increasing and multiplicatively decreasing as TCP does: when the upstream
// reports less left than one local bucket, its rates drop by a fifth; when it reports at
// least two buckets' worth, they recover by a tenth of the configured rate; at most once a
// second, and never below a tenth. Processes sharing a key converge to sharing its quota.
// A single process never drains the upstream below its own bucket and keeps its full rate.

const (
	adaptEvery    = time.Second
	adaptDecrease = 0.8
	adaptIncrease = 0.1
	adaptFloor    = 0.1
)

// rateScaler is implemented by states whose rates the limiter may scale: private,
// in-memory ones. A shared store's state is the same for every process, which needs no
// adaptation.
type rateScaler interface {
	ScaleRates(factor float64)
}

// adaptation is a key limiter's rate factor.
type adaptation struct {
	mu     sync.Mutex
	factor float64
	last   time.Time
}

// next returns the new factor after a report of the upstream's remaining requests and
// tokens (negative: unknown) against the local bucket sizes, and whether it changed.
func (a *adaptation) next(now time.Time, requests, tokens int64, reqBurst, tokBurst float64) (float64, bool) {
	low := (requests >= 0 && reqBurst > 0 && float64(requests) < reqBurst) ||
		(tokens >= 0 && tokBurst > 0 && float64(tokens) < tokBurst)
	high := (requests < 0 || reqBurst == 0 || float64(requests) >= 2*reqBurst) &&
		(tokens < 0 || tokBurst == 0 || float64(tokens) >= 2*tokBurst)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.factor == 0 {
		a.factor = 1
	}
	if now.Sub(a.last) < adaptEvery || (!low && !high) || (high && a.factor == 1) {
		return a.factor, false
	}
	a.last = now
	if low {
		a.factor = max(adaptFloor, a.factor*adaptDecrease)
	} else {
		a.factor = min(1, a.factor+adaptIncrease)
	}
	return a.factor, true
}
