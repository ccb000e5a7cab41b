package anthropic_test

import (
	"flag"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-ant-test-0123456789"

// serve starts a recording loopback server answering with reply, and a Provider that
// sends it testKey.
func serve(t *testing.T, reply http.HandlerFunc, opts ...anthropic.Option) (*anthropic.Provider, *providertest.Server) {
	t.Helper()
	srv := providertest.NewServer(t, reply)
	all := append([]anthropic.Option{
		anthropic.WithBaseURL(srv.URL),
		anthropic.WithHTTPClient(srv.Client()),
		anthropic.WithAPIKey(testKey),
	}, opts...)
	p, err := anthropic.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return p, srv
}
