package redisstore

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/limitstore"
)

// replyOf builds a script reply from s, as go-redis hands it over: "|" separates the
// elements of an array, an element "i<n>" is a Lua number (int64), "a" a nested empty
// array, anything else a string; a reply without "|" is a lone string.
func replyOf(s string) any {
	if !strings.Contains(s, "|") {
		return s
	}
	parts := strings.Split(s, "|")
	out := make([]any, len(parts))
	for i, p := range parts {
		switch {
		case p == "a":
			out[i] = []any{}
		case strings.HasPrefix(p, "i"):
			if n, err := strconv.ParseInt(p[1:], 10, 64); err == nil {
				out[i] = n
				continue
			}
			out[i] = p
		default:
			out[i] = p
		}
	}
	return out
}

// FuzzReplies feeds the readers of the scripts' replies whatever a server (or a proxy
// in front of it) might send: none panics, a grant's wait stays within [0, WaitHorizon],
// a refused or batch grant carries no levels, and a budget answer is whole or refused.
func FuzzReplies(f *testing.F) {
	for _, s := range []string{
		"i1|i0|i7|9|99.5||1|2|3|4", "i0|i250000", "i1|i-5", "i1|i9223372036854775807|i1|1|2|3|4|5|6|7",
		"i1|NaN|+Inf|-Inf|1e400|x|a|i3|4|5", "i3|1|2|3|4|5|6|7|8|9|10|11|12|13|14",
		"i1|10|20|i0|i0|i0", "i0|10|20|i1|7|i0", "10|20|i1", "-1|99999999999999999999|i4294967296", "garbage",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := replyOf(s)
		for _, lane := range []limitstore.Lane{limitstore.LaneMain, limitstore.LaneBatch} {
			g, ok := grantOf(v, lane)
			if !ok {
				continue
			}
			if g.Wait < 0 || g.Wait > WaitHorizon {
				t.Fatalf("grantOf(%q): wait %v outside [0, %v]", s, g.Wait, WaitHorizon)
			}
			if (!g.OK || lane == limitstore.LaneBatch) && !math.IsNaN(g.Levels.Requests) {
				t.Fatalf("grantOf(%q, %v): levels %+v for a refused or batch grant", s, lane, g.Levels)
			}
		}
		_, _ = correctionOf(v)
		if res, ok := reserveResult(v); ok && (res.OK || res.Never) && res.FreeAfter != 0 {
			t.Fatalf("reserveResult(%q) = %+v: FreeAfter without a refusal that may fit", s, res)
		}
		if res, ok := settleResult(v); ok && !res.OK {
			t.Fatalf("settleResult(%q) = %+v: a settle always succeeds", s, res)
		}
		if a, isArray := v.([]any); isArray {
			for _, x := range a {
				_, _ = replyInt(x)
				_, _ = count(x)
			}
		}
	})
}
