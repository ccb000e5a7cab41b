package redisstore_test

import (
	"math"
	"slices"
	"strconv"
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
// position (others ordinary), on a scope a reservation held in flight has just used: no
// run fails, every reply is an integer within the horizon or a count that is finite (or
// "" for unknown; the hold renewal's replies are members it was sent), and every key the
// scripts write expires, within twice WaitHorizon and an hour, holding no NaN or infinity.
func TestScriptsTakeAnyArgument(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	slotKeys := []string{"{t:s}:s", "{t:s}:sb", "{t:s}:w", "{t:s}:wx"}
	spec := []string{"100000", "10", "600", "16666", "864000000", "100", "864", "100000", "0.8"}
	with := func(args ...string) []string { return append(append([]string{""}, spec...), args...) }
	report := []string{"9e15", "1", "100", "2", "200", "0", "50", "1", "100", "1", "1000", "0", "0",
		"100", "100", "1", "0.5"}
	cases := []struct {
		script string
		slots  bool
		args   []string
	}{
		{"reserve", false, with("m", "1", "100", "0", "-1")},
		{"reserve", false, with("m", "1", "100", "0", "-1", "1", "200", "10000000")},
		{"reserve", false, with("b", "1", "100", "90", "5000")},
		{"adjust", false, with("m", "1", "100")},
		{"adjust", false, with("m", "0", "-10", "1800000000000000:100")},
		{"adjust", false, with("m", "-1", "-100")},
		{"adjust", false, with("b", "1", "100")},
		{"sync", false, with(report...)},
		{"retune", false, with(spec...)},
		{"block", false, []string{"", "p", "1000000"}},
		{"block", false, []string{"", "x", "1000000"}},
		{"blocked", false, []string{""}},
		{"reserve", false, append([]string{"1800000000000000"}, with("m", "1", "100", "0", "-1")[1:]...)},
		{"slot", true, []string{"wait", "m1", "4", "2", "1000", "600"}},
		{"slot", true, []string{"release", "m1", "4", "2", "1000", "600"}},
		{"renew", true, []string{"1000", "m1", "b2"}},
		{"holdRenew", false, []string{"", "10000000", "1800000000000000:100", "2:1"}},
	}
	horizon := redisstore.WaitHorizon.Microseconds()
	run := 0
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
				run++
				tag := "{t:" + strconv.Itoa(run) + "}:"
				keys := []string{tag + "g", tag + "hz"}
				if c.slots {
					keys = slotKeys
				} else {
					// A reservation held in flight: the scope has a hold.
					first := with("m", "1", "100", "0", "-1", "1", "", "10000000")
					if err := redisstore.Scripts["reserve"].Run(ctx(t), rdb, keys, toAny(first)...).Err(); err != nil {
						t.Fatal(err)
					}
				}
				v, err := redisstore.Scripts[c.script].Run(ctx(t), rdb, keys, anyArgs...).Result()
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
				if c.script == "reserve" && len(replies) == 11 { // a hold's member: "<mark>:<tokens>"
					m, _ := replies[10].(string)
					mark, tok, _ := strings.Cut(m, ":")
					replies = append(replies[:10:10], mark, tok)
				}
				for _, r := range replies {
					if first, ok := map[string]int{"holdRenew": 2, "renew": 1}[c.script]; ok { // members made again
						if m, ok := r.(string); !ok || !slices.Contains(args[first:], m) {
							t.Fatalf("%s %q: reply %v is not a member it was sent", c.script, args, v)
						}
						continue
					}
					switch r := r.(type) {
					case int64:
						if r < 0 || r > horizon {
							t.Fatalf("%s %q: reply %v outside [0, WaitHorizon]", c.script, args, v)
						}
					case string:
						if x, err := strconv.ParseFloat(r, 64); r != "" && (err != nil || math.IsNaN(x) || math.IsInf(x, 0)) {
							t.Fatalf("%s %q: reply %v holds a count that is not a finite number", c.script, args, v)
						}
					default:
						t.Fatalf("%s %q: reply %v of type %T", c.script, args, v, r)
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
		if err != nil || ttl <= 0 || ttl > 2*redisstore.WaitHorizon+time.Hour+time.Second {
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

func toAny(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}
