package gemini_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

// TestStreamCloseAfterEndKeepsConnection: a Gemini stream has no end marker, so it ends
// only when a read reaches the body's end, and net/http can reuse the connection.
func TestStreamCloseAfterEndKeepsConnection(t *testing.T) {
	providertest.CheckBodyEndKeepsConnection(t, streamText, func(t *testing.T, srv *httptest.Server) llmclient.ProviderStream {
		t.Helper()
		p, err := gemini.New(gemini.WithBaseURL(srv.URL), gemini.WithHTTPClient(srv.Client()), gemini.WithAPIKey(testKey))
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stream(context.Background(), providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("Count")))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
