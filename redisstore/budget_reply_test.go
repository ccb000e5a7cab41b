package redisstore_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestUnexpectedBudgetReplies: a budget script answered with something else than it
// returns (here a 16 MB string) is a Redis failure, as for the limiter's scripts: under
// FailOpen Reserve admits against the local ledger, and its Settle is counted there;
// under FailClosed Reserve refuses with ErrUnavailable, and the error stays small. The
// ledger used to return the error under FailOpen too, so a Client refused the attempt.
func TestUnexpectedBudgetReplies(t *testing.T) {
	big := strings.Repeat("x", 16<<20)
	fake := startFakeRedis(t, "$"+strconv.Itoa(len(big))+"\r\n"+big+"\r\n")
	p := limitstore.BudgetPeriod{Slice: 7, Oldest: 7, Epoch: 7, TTL: time.Minute}
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: fake.l.Addr().String(), ContextTimeoutEnabled: true, Protocol: 2})
			t.Cleanup(func() { rdb.Close() })
			s, err := redisstore.New(rdb, redisstore.WithFailMode(mode), redisstore.WithTimeout(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			l := s.OpenBudget("b", limitstore.BudgetSpec{Cap: 100, Soft: []int64{50}})
			res, err := l.Reserve(ctx(t), "", p, 60, false)
			if s.Healthy() {
				t.Error("the store took an unusable reply for a healthy Redis")
			}
			switch mode {
			case redisstore.FailOpen:
				if err != nil || !res.OK || res.Reserved != 60 {
					t.Fatalf("FailOpen Reserve: %+v, %.200v; want a local reservation of 60", res, err)
				}
				// The local ledger holds it: a second one does not fit under the cap.
				if res, err := l.Reserve(ctx(t), "", p, 60, false); err != nil || res.OK {
					t.Fatalf("FailOpen second Reserve: %+v, %.200v; want the local cap to refuse it", res, err)
				}
				res, err := l.Settle(ctx(t), "", p, p.Slice, 60, 55)
				if err != nil || res.Spent != 55 || res.Reserved != 0 || res.Fired != 1 {
					t.Fatalf("FailOpen Settle: %+v, %.200v; want it counted locally", res, err)
				}
			case redisstore.FailClosed:
				if !errors.Is(err, redisstore.ErrUnavailable) || res.OK {
					t.Fatalf("FailClosed Reserve: %+v, %.200v; want ErrUnavailable", res, err)
				}
				if n := len(err.Error()); n > 200 {
					t.Fatalf("the error holds %d bytes of what the server sent", n)
				}
			}
		})
	}
}
