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

// heldRequest is a gateway serving on loopback whose admin listener breaks on demand,
// with one chat request in flight that the upstream holds until release is closed (or
// the gateway's upstream call ends).
type heldRequest struct {
	g        *llmgateway.Gateway
	api      net.Listener
	admin    *brokenListener
	release  chan struct{}
	served   chan error // Serve's result, sent after atReturn ran
	answered chan error // the request's outcome: nil for a 200 read whole
}

// startHeldRequest starts it with extra configuration and a JSON logger writing to logs,
// and returns once the request is in flight at the upstream; atReturn runs as Serve
// returns.
func startHeldRequest(t *testing.T, extra string, logs io.Writer, atReturn func()) *heldRequest {
	t.Helper()
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	inFlight := make(chan struct{})
	h := &heldRequest{release: make(chan struct{}), served: make(chan error, 1), answered: make(chan error, 1)}
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		close(inFlight)
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		return false // the usual answer
	})
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, extra)), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	if h.g, err = llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(logs, nil)))); err != nil {
		t.Fatal(err)
	}
	var adminLn net.Listener
	h.api, adminLn = loopbackListeners(t)
	t.Cleanup(func() { adminLn.Close() })
	h.admin = &brokenListener{Listener: adminLn, broken: make(chan struct{})}
	go func() {
		err := h.g.Serve(h.api, h.admin)
		atReturn()
		h.served <- err
	}()
	go func() {
		req, _ := http.NewRequest("POST", "http://"+h.api.Addr().String()+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		h.answered <- err
	}()
	<-inFlight
	return h
}

// breakAdmin fails the admin listener and returns once the gateway's shutdown has begun:
// the API listener no longer accepts.
func (h *heldRequest) breakAdmin(t *testing.T) {
	t.Helper()
	close(h.admin.broken)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := net.Dial("tcp", h.api.Addr().String())
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the API listener still accepts after the admin listener failed")
		}
	}
}

// A listener that fails ends Serve only after the requests in flight on the other one
// were answered and logged: the process that exits on Serve's error does not cut them.
func TestFailedListenerDrainsBeforeServeReturns(t *testing.T) {
	logs := &syncBuffer{}
	var logAtReturn atomic.Value
	h := startHeldRequest(t, "", logs, func() { logAtReturn.Store(logs.String()) })
	h.breakAdmin(t)
	close(h.release)
	if err := <-h.served; err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("Serve: %v; want the listener's error", err)
	}
	if err := <-h.answered; err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	// The handler logs the request as it ends: its line was there when Serve returned.
	if l := logAtReturn.Load().(string); !strings.Contains(l, `"msg":"request"`) || !strings.Contains(l, `"status":200`) {
		t.Fatalf("Serve returned before the request in flight ended; the log then:\n%s", l)
	}
}

// A second Shutdown waits for the drain a failed listener began, and its context's end
// cuts that drain: the request held in flight is cut and Serve returns.
func TestSecondShutdownCutsTheDrainOfAFailedListener(t *testing.T) {
	h := startHeldRequest(t, "shutdown_grace: 1h\n", io.Discard, func() {})
	defer close(h.release)
	h.breakAdmin(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.g.Shutdown(ctx); err == nil {
		t.Fatal("a second Shutdown with an ended context returned nil: it did not wait for the drain or cut it")
	}
	if err := <-h.served; err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("Serve: %v; want the listener's error", err)
	}
	if err := <-h.answered; err == nil {
		t.Fatal("the request held in flight was answered: the drain was not cut")
	}
}
