package llmgateway_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// TestServeAfterShutdownReturnsAtOnce: a Shutdown that begins before Serve (the
// command's SIGTERM arriving as it starts) ends the Serve that follows at once,
// its listeners closed, instead of serving with nothing left to stop it.
func TestServeAfterShutdownReturnsAtOnce(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, "")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	api, admin := loopbackListeners(t)
	done := make(chan error, 1)
	go func() { done <- g.Serve(api, admin) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		api.Close()
		admin.Close()
		<-done
		t.Fatal("Serve after Shutdown was still serving after 10s")
	}
	for _, l := range []net.Listener{api, admin} {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			t.Fatalf("%s still accepts connections", l.Addr())
		}
	}
}
