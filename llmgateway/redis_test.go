package llmgateway_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis runs a redis-server on a free loopback port for the test, without
// persistence; the test is skipped when redis-server is not installed.
func startRedis(t *testing.T) string {
	t.Helper()
	addr, _ := startRedisProc(t)
	return addr
}

// startRedisProc is startRedis, returning the server's process too.
func startRedisProc(t *testing.T) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i > 400 {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return addr, cmd.Process
}

// Two replicas configured with the same redis share a tenant's limit and the cache.
func TestReplicasShareLimitsAndCacheThroughRedis(t *testing.T) {
	addr := startRedis(t)
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg := baseConfig(oa, an, fmt.Sprintf(`
redis: {addr: %q, prefix: gwtest, timeout: 2s}
cache: {enabled: true, redis: true}
limiter: {mode: fail_fast}
tenant_limits: {rpm: 2, request_burst: 2}
`, addr))
	r1, r2 := startGateway(t, cfg), startGateway(t, cfg)
	chat := func(g *gw, text string) int {
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"`+text+`"}]}`)
		return resp.StatusCode
	}
	if chat(r1, "one") != 200 {
		t.Fatal("first request")
	}
	// The same question on the other replica is a cache hit: no upstream call.
	for i := 0; ; i++ {
		calls := oa.count()
		if chat(r2, "one") != 200 {
			t.Fatal("cached request")
		}
		if oa.count() == calls {
			break
		}
		if i > 50 {
			t.Fatal("the other replica never answered from the shared cache")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Tenant a's two requests a minute are spent across both replicas.
	codes := []int{chat(r2, "two"), chat(r1, "three"), chat(r2, "four")}
	if codes[len(codes)-1] != 429 {
		t.Fatalf("the shared tenant limit was not enforced across replicas: %v", codes)
	}
}

// Shutdown closes the Client before the stores: the budget spend queued while Redis did
// not answer is sent once it does, and a replica that starts afterwards reads it.
func TestShutdownFlushesBudgetSpendQueuedDuringARedisOutage(t *testing.T) {
	addr, proc := startRedisProc(t)
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg := baseConfig(oa, an, fmt.Sprintf(`
redis: {addr: %q, prefix: gwflush, timeout: 200ms, fail_mode: open}
budgets: [{name: all, cap_usd: 10}]
`, addr))
	g := newGW(t, cfg)
	defer g.api.Close()
	defer g.admin.Close()
	chat := func() {
		t.Helper()
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", chatBodyMini); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	spent := func(g *gw) float64 {
		t.Helper()
		st, err := g.Client().Budget(context.Background(), "all", "")
		if err != nil {
			t.Fatal(err)
		}
		return st.Spent.Dollars()
	}
	chat()
	one := spent(g)
	if one <= 0 {
		t.Fatalf("one call spent %v", one)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Skipf("cannot stop redis-server: %v", err)
	}
	for range 5 {
		chat()
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	r := startGateway(t, cfg)
	if got := spent(r); got < 5.5*one {
		t.Fatalf("a replica started after the shutdown reads %v spent, want the 6 calls' %v", got, 6*one)
	}
}
