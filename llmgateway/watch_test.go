package llmgateway_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// watched is a Gateway built inside a synctest bubble from file, with its log, and
// WatchFile running every second; stop ends it and shuts the Gateway down.
func watched(t *testing.T, file string) (g *llmgateway.Gateway, logs *syncBuffer, stop func()) {
	t.Helper()
	cfg, err := llmgateway.LoadFile(file, env(append(append([]string{}, baseEnv...), reloadEnv...)...))
	if err != nil {
		t.Fatal(err)
	}
	logs = &syncBuffer{}
	g, err = llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.WatchFile(ctx, file, time.Second); close(done) }()
	return g, logs, func() {
		cancel()
		<-done
		_ = g.Shutdown(context.Background())
	}
}

// TestWatchFileDoesNotReloadWhatWasReloaded: a change that SIGHUP or /admin/reload
// applied before the watcher saw it is not applied, nor refused, a second time.
func TestWatchFileDoesNotReloadWhatWasReloaded(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	file := writeConfig(t, baseConfig(oa, an, ""))
	synctest.Test(t, func(t *testing.T) {
		g, logs, stop := watched(t, file)
		defer stop()
		for _, tc := range []struct{ yaml, line string }{
			{baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n"), "configuration reloaded"},
			{"upstreams: [broken", "reload refused"},
		} {
			if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			before := strings.Count(logs.String(), tc.line)
			_ = g.ReloadFile(file)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if n := strings.Count(logs.String(), tc.line) - before; n != 1 {
				t.Errorf("%q logged %d times for one change, want 1:\n%s", tc.line, n, logs)
			}
		}
	})
}

// TestWatchFileWaitsForTheFileToSettle: the watcher applies a change once the file
// reads the same at two checks in a row; a file it catches half-written (here valid,
// with a tenant missing) is not applied.
func TestWatchFileWaitsForTheFileToSettle(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	withC := baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n")
	file := writeConfig(t, baseConfig(oa, an, ""))
	synctest.Test(t, func(t *testing.T) {
		_, logs, stop := watched(t, file)
		defer stop()
		time.Sleep(500 * time.Millisecond)
		// Tenant a written, b and c not yet: the watcher reads this at 1s.
		half, _, _ := strings.Cut(withC, "  - name: b\n")
		if err := os.WriteFile(file, []byte(half), 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := os.WriteFile(file, []byte(withC), 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := strings.Count(logs.String(), "configuration reloaded"); got != 1 || !strings.Contains(logs.String(), `"tenants":3`) {
			t.Fatalf("want one reload, of the whole file (3 tenants):\n%s", logs)
		}
	})
}
