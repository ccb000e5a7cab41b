package llmgateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// brokenListener's Accept fails for good once broken is closed.
type brokenListener struct {
	net.Listener
	broken chan struct{}
}

func (l *brokenListener) Accept() (net.Conn, error) {
	<-l.broken
	return nil, errors.New("listener broke")
}

// A listener that fails ends Serve only after the requests in flight on the other one
// were answered and logged: the process that exits on Serve's error does not cut them.
func TestFailedListenerDrainsBeforeServeReturns(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	inFlight, release := make(chan struct{}), make(chan struct{})
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		close(inFlight)
		<-release
		return false // the usual answer
	})
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, "")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	api, adminLn := loopbackListeners(t)
	admin := &brokenListener{Listener: adminLn, broken: make(chan struct{})}
	defer adminLn.Close()

	served := make(chan error, 1)
	var logAtReturn atomic.Value
	go func() {
		err := g.Serve(api, admin)
		logAtReturn.Store(logs.String())
		served <- err
	}()
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+api.Addr().String()+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-inFlight
	close(admin.broken)
	waitNotAccepting(t, api.Addr().String())
	close(release)
	if err := <-served; err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("Serve: %v; want the listener's error", err)
	}
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the request in flight got %d", code)
	}
	// The handler logs the request as it ends: its line was there when Serve returned.
	if l := logAtReturn.Load().(string); !strings.Contains(l, `"msg":"request"`) || !strings.Contains(l, `"status":200`) {
		t.Fatalf("Serve returned before the request in flight ended; the log then:\n%s", l)
	}
}

// A second Shutdown waits for the drain a failed listener began, and its context's end
// cuts that drain: the request held in flight is cut and Serve returns.
func TestSecondShutdownCutsTheDrainOfAFailedListener(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	inFlight, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		close(inFlight)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, "shutdown_grace: 1h\n")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api, adminLn := loopbackListeners(t)
	admin := &brokenListener{Listener: adminLn, broken: make(chan struct{})}
	defer adminLn.Close()
	served := make(chan error, 1)
	go func() { served <- g.Serve(api, admin) }()
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+api.Addr().String()+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				err = errors.New("answered")
			}
		}
		answered <- err
	}()
	<-inFlight
	close(admin.broken)
	waitNotAccepting(t, api.Addr().String()) // the failed listener's shutdown has begun
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Shutdown(ctx); err == nil {
		t.Fatal("a second Shutdown with an ended context returned nil: it did not wait for the drain or cut it")
	}
	if err := <-served; err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("Serve: %v; want the listener's error", err)
	}
	if err := <-answered; err != nil && err.Error() == "answered" {
		t.Fatal("the request held in flight was answered: the drain was not cut")
	}
}

// waitNotAccepting returns once addr refuses connections: the gateway's shutdown has
// begun.
func waitNotAccepting(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the API listener still accepts after the admin listener failed")
		}
	}
}
