package redisstore_test

import (
	"context"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// reserveWait is st.Reserve reduced to its wait and admission, for the tests that check no
// more.
func reserveWait(st limitstore.State, ctx context.Context, r limitstore.Reservation) (time.Duration, bool, error) {
	g, err := st.Reserve(ctx, r)
	return g.Wait, g.OK, err
}

// pausedFor is what is left of st's pause.
func pausedFor(st limitstore.State, ctx context.Context) (time.Duration, error) {
	b, err := st.Blocked(ctx)
	return b.Paused, err
}

// report reserves one request of one token on st's main lane and reports that the
// upstream had target left after it, in every bucket, with a gain of 1: what Sync did.
func report(st limitstore.State, ctx context.Context, target float64) (limitstore.Correction, error) {
	g, err := st.Reserve(ctx, limitstore.Reservation{Requests: 1, Tokens: 1, MaxWait: -1})
	if err != nil {
		return limitstore.Correction{}, err
	}
	lv := limitstore.Levels{Requests: target, Tokens: target, DailyRequests: target, DailyTokens: target}
	return st.Sync(ctx, limitstore.Report{Mark: g.Mark, Predicted: g.Levels, Target: lv,
		Reserve: limitstore.Unknown, Totals: g.Totals})
}
