package cache

import (
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
)

// How a stored idempotency record's fingerprint is compared with a call's, across the
// deploys that change what the exact key holds.
func TestMatchFingerprint(t *testing.T) {
	req := func(text string, meta map[string]string) *llmclient.Request {
		return &llmclient.Request{Model: "m", Metadata: meta, Messages: []llmclient.Message{llmclient.UserMessage(text)}}
	}
	v1, v2 := map[string]string{"pv": "1"}, map[string]string{"pv": "2"}
	ours := fingerprint(req("hi", v1), []string{"pv"})
	exact := key('x', "", "", req("hi", v1), []string{"pv"})
	for name, tc := range map[string]struct {
		stored string
		want   match
	}{
		"the same request": {ours, sameRequest},
		"key metadata named in another order, or twice": {fingerprint(req("hi", v1), []string{"tier", "pv", "pv"}), sameRequest},
		"key metadata the request does not carry":       {fingerprint(req("hi", v1), []string{"pv", "tier"}), sameRequest},
		"another request": {fingerprint(req("bye", v1), []string{"pv"}), otherRequest},
		"another request, under other key metadata": {fingerprint(req("bye", v1), nil), otherRequest},
		"other key metadata, named alike":           {fingerprint(req("hi", v2), []string{"pv"}), otherRequest},
		"metadata the other build did not key":      {fingerprint(req("hi", v1), nil), unknown},
		"a record that stored the exact key":        {exact, sameRequest},
		"a record that stored another exact key":    {key('x', "", "", req("hi", v1), nil), unknown},
		"another version of the request's encoding": {"f1" + strings.TrimPrefix(ours, "f2"), unknown},
		"no fingerprint":                            {"", unknown},
	} {
		if got := matchFingerprint(tc.stored, ours, exact); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if keyVersion != 2 {
		t.Errorf("keyVersion %d: update the case of another version", keyVersion)
	}
	// Metadata that is not key metadata, the namespace and the partition are not in it.
	if fingerprint(req("hi", map[string]string{"pv": "1", "trace": "a"}), []string{"pv"}) != ours {
		t.Error("other metadata changed the fingerprint")
	}
}
