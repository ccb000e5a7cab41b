package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/redisstore"
)

// hostile are arguments no Store sends: the scripts clamp what the Go side clamps, so
// none of them makes a script fail.
var hostile = []string{"nan", "NaN", "-nan", "inf", "-inf", "1e308", "-1e308", "1e400", "9223372036854775807",
	"-9223372036854775808", "4.9e-324", "0", "-0", "", "x", "0x10", " 12 "}

// TestScriptsTakeAnyArgument runs every script with each hostile value in every argument
// position (others ordinary): no run fails, every reply is an integer or two within the
// horizon, and every key the scripts write expires, within twice WaitHorizon.
func TestScriptsTakeAnyArgument(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	bucketKeys := []string{"{t:s}:g"}
	slotKeys := []string{"{t:s}:s", "{t:s}:sb", "{t:s}:w", "{t:s}:wx"}
	cases := []struct {
		script string
		keys   []string
		args   []string
	}{
		{"reserve", bucketKeys, []string{"m", "1", "100", "-1", "100000", "10", "600", "16666"}},
		{"reserve", bucketKeys, []string{"b", "1", "100", "5000", "100000", "10", "600", "16666"}},
		{"adjust", bucketKeys, []string{"m", "1", "100", "100000", "10", "600", "16666"}},
		{"sync", bucketKeys, []string{"m", "0", "0", "100000", "10", "600", "16666"}},
		{"pause", bucketKeys, []string{"m", "1000000"}},
		{"pauseLeft", bucketKeys, nil},
		{"slot", slotKeys, []string{"wait", "m1", "4", "2", "1000", "600"}},
		{"slot", slotKeys, []string{"release", "m1", "4", "2", "1000", "600"}},
		{"renew", slotKeys[:2], []string{"1000", "m1", "b2"}},
	}
	horizon := redisstore.WaitHorizon.Microseconds()
	for _, c := range cases {
		for pos := range len(c.args) + 1 {
			for _, h := range hostile {
				args := append([]string(nil), c.args...)
				if pos < len(args) {
					args[pos] = h
				} else {
					args = append(args, h)
				}
				anyArgs := make([]any, len(args))
				for i, a := range args {
					anyArgs[i] = a
				}
				v, err := redisstore.Scripts[c.script].Run(ctx(t), rdb, c.keys, anyArgs...).Result()
				if err != nil {
					t.Fatalf("%s %q: %v", c.script, args, err)
				}
				var replies []any
				switch r := v.(type) {
				case int64:
					replies = []any{r}
				case []any:
					replies = r
				default:
					t.Fatalf("%s %q: reply %T", c.script, args, v)
				}
				for _, r := range replies {
					if n, ok := r.(int64); !ok || n < 0 || n > horizon {
						t.Fatalf("%s %q: reply %v outside [0, WaitHorizon]", c.script, args, v)
					}
				}
			}
		}
	}
	keys, err := rdb.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx(t), k).Result()
		if err != nil || ttl <= 0 || ttl > 2*redisstore.WaitHorizon+time.Second {
			t.Errorf("key %q: TTL %v, %v", k, ttl, err)
		}
		if typ, _ := rdb.Type(ctx(t), k).Result(); typ == "hash" {
			fields, _ := rdb.HGetAll(ctx(t), k).Result()
			for f, v := range fields {
				if strings.ContainsAny(strings.ToLower(v), "in") { // nan, inf
					t.Errorf("key %q field %s = %q", k, f, v)
				}
			}
		}
	}
}
