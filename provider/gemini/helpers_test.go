package gemini_test

import (
	"flag"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "AIzaSyTest-0123456789abcdef"

// serve starts a recording loopback server answering with reply, and a Provider that
// sends it testKey.
func serve(t *testing.T, reply http.HandlerFunc, opts ...gemini.Option) (*gemini.Provider, *providertest.Server) {
	t.Helper()
	srv := providertest.NewServer(t, reply)
	all := append([]gemini.Option{
		gemini.WithBaseURL(srv.URL),
		gemini.WithHTTPClient(srv.Client()),
		gemini.WithAPIKey(testKey),
	}, opts...)
	p, err := gemini.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return p, srv
}
