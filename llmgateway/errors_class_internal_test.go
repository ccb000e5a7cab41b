package llmgateway

import (
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// A model a budget cannot price is a policy refusal: 403 in both vendors' shapes, never
// retried, never a 502 that reads as an upstream failure.
func TestUnpricedIsAPolicyRefusal(t *testing.T) {
	e := fromError(&llmclient.Error{Class: failure.Unpriced, Message: "no price"})
	if e.status != 403 || e.anType != "permission_error" || e.oaCode != "model_unpriced" || !e.noRetry {
		t.Fatalf("unpriced answered %d %q %q retry=%v", e.status, e.anType, e.oaCode, !e.noRetry)
	}
}
