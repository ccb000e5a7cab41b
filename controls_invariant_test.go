package llmclient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/require"
)

// controlModel is what the operator's controls should have left: per upstream, drained,
// a forced breaker state, and evicted keys.
type controlModel struct {
	drained map[string]bool
	forced  map[string]string // "", "open", "closed"
	evicted map[string]map[string]bool
	keys    map[string][]string
}

// refusal is the reason Snapshot should give for up, "" when it serves.
func (m *controlModel) refusal(up string) string {
	switch {
	case m.drained[up]:
		return "drained"
	case m.forced[up] == "open":
		return "forced_open"
	}
	for _, k := range m.keys[up] {
		if !m.evicted[up][k] {
			return ""
		}
	}
	return "no_key"
}

// Over random sequences of operator controls, each control's effect is visible in the
// next call and in Snapshot: Snapshot says an upstream serves exactly when the model of
// the controls says so, with the model's reason, and the next call is served by the first
// upstream of the route that serves — or fails unavailable when none does.
func TestControlsTakeEffectInTheNextCallAndSnapshot(t *testing.T) {
	ups := []string{"a", "b"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("a").Forever()), Keys: []string{"s1", "s2"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: fake.New(fake.Reply("b").Forever()), Keys: []string{"s3"}}))
		m := &controlModel{drained: map[string]bool{}, forced: map[string]string{},
			evicted: map[string]map[string]bool{"a": {}, "b": {}},
			keys:    map[string][]string{"a": {"key#1", "key#2"}, "b": {"key#1"}}}
		var log []string
		for step := range 25 {
			u := ups[rng.IntN(len(ups))]
			var err error
			switch op := rng.IntN(7); op {
			case 0, 1:
				on := op == 0
				err, m.drained[u] = c.Drain(u, on), on
				log = append(log, fmt.Sprintf("Drain(%s,%v)", u, on))
			case 2:
				err, m.forced[u] = c.ForceBreakerOpen(u), "open"
				log = append(log, "ForceBreakerOpen("+u+")")
			case 3:
				err, m.forced[u] = c.ForceBreakerClosed(u), "closed"
				log = append(log, "ForceBreakerClosed("+u+")")
			case 4:
				err, m.forced[u] = c.ResetBreaker(u), ""
				log = append(log, "ResetBreaker("+u+")")
			case 5, 6:
				k := m.keys[u][rng.IntN(len(m.keys[u]))]
				if op == 5 {
					err, m.evicted[u][k] = c.EvictKey(u, k), true
					log = append(log, "EvictKey("+u+","+k+")")
				} else {
					err, m.evicted[u][k] = c.RestoreKey(u, k), false
					log = append(log, "RestoreKey("+u+","+k+")")
				}
			}
			require.NoError(t, err, "seed %d step %d: %v", seed, step, log)
			want := ""
			for _, s := range c.Snapshot().Upstreams {
				require.Equal(t, m.refusal(s.Name), s.Refusal, "seed %d step %d: Snapshot of %s after %v", seed, step, s.Name, log)
				require.Equal(t, s.Refusal == "", s.Serving, "seed %d step %d", seed, step)
				if want == "" && s.Serving {
					want = s.Name
				}
			}
			resp, err := c.Complete(context.Background(), chatReq("m"))
			if want == "" {
				require.Error(t, err, "seed %d step %d: no upstream serves after %v", seed, step, log)
				require.Equal(t, failure.Unavailable, llmclient.ClassOf(err), "seed %d step %d: %v", seed, step, err)
				continue
			}
			require.NoError(t, err, "seed %d step %d: %s serves after %v", seed, step, want, log)
			require.Equal(t, want, resp.Upstream, "seed %d step %d: after %v", seed, step, log)
		}
	}
}
