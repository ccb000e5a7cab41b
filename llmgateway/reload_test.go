package llmgateway_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

var reloadEnv = []string{"UP_KEY2", "sk-upstream-2", "TENANT_C", "gw-key-c"}

func TestReloadAppliesKeysAndTenantsAndKeepsState(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	file := writeConfig(t, baseConfig(oa, an, ""))
	g := startGatewayFile(t, file)
	if err := g.Client().ForceBreakerOpen("an"); err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(baseConfig(oa, an, `  - name: c
    keys_env: [TENANT_C]
    models: [gpt-4o]
`), "keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY2]\n    models: {gpt-4o", 1)
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-c", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || oa.lastKey() != "sk-upstream-2" {
		t.Fatalf("after reload: %d %s, upstream key %q", resp.StatusCode, body, oa.lastKey())
	}
	// The breaker forced open before the reload is still open.
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 503 {
		t.Fatalf("breaker state lost: %d %s", resp.StatusCode, body)
	}
	if an.count() != 0 {
		t.Fatal("the open breaker's upstream was called")
	}
}

func TestInvalidReloadChangesNothing(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	file := writeConfig(t, baseConfig(oa, an, ""))
	g := startGatewayFile(t, file)
	withTenantC := baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n")
	for _, tc := range []struct{ name, yaml, want string }{
		{"invalid", strings.Replace(withTenantC, "upstreams: [oa, an]", "upstreams: [oa, ghost]", 1), `unknown upstream "ghost"`},
		{"unset key", strings.Replace(withTenantC, "keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY9]\n    models: {gpt-4o", 1), "UP_KEY9 is not set"},
		{"budget added", withTenantC + "budgets:\n  - {name: x, cap_usd: 1}\n", "budgets: changing it needs a restart"},
		{"tenant limits", strings.Replace(withTenantC, "models: [gpt-4o-mini]", "models: [gpt-4o-mini]\n    limits: {rpm: 5}", 1), `tenant "b": changing its own limits needs a restart`},
		{"upstream vendor", strings.Replace(withTenantC, "vendor: anthropic", "vendor: gemini", 1), "upstreams: changing it needs a restart"},
		{"procs", withTenantC + "procs: 1\n", "procs: changing it needs a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			err := g.ReloadFile(file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload: %v", err)
			}
			// Tenant c, in every refused file, was not added; the old keys still work.
			if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-c", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 401 {
				t.Fatalf("tenant c: %d", resp.StatusCode)
			}
			if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 || oa.lastKey() != "sk-upstream-1" {
				t.Fatalf("tenant a: %d %s key %q", resp.StatusCode, body, oa.lastKey())
			}
		})
	}
	// Adding an upstream needs a restart, even alongside changes a reload could make.
	added := strings.Replace(withTenantC, "groups:", "  - {name: extra, vendor: openai, base_url: "+oa.URL+"/v1}\ngroups:", 1)
	cfg, err := llmgateway.Parse([]byte(added), env(append(append([]string{}, baseEnv...), reloadEnv...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err == nil || !strings.Contains(err.Error(), "upstreams: changing it needs a restart") {
		t.Fatalf("added upstream: %v", err)
	}
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-c", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 401 {
		t.Fatalf("tenant c after a refused reload: %d", resp.StatusCode)
	}
}

func startGatewayFile(t *testing.T, file string) *gw {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, string(data), reloadEnv...)
	// Parse keeps no file name; reload through the file from now on.
	cfg, err := llmgateway.LoadFile(file, env(append(append([]string{}, baseEnv...), reloadEnv...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestReloadUnderLoadLosesNoRequest(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	limits := func(rpm int) string {
		return fmt.Sprintf("    limits: {rpm: %d, max_concurrent: 64}\n", rpm)
	}
	a := strings.Replace(baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o, claude-sonnet]}\n"), "    models: {claude-sonnet", limits(100000)+"    models: {claude-sonnet", 1)
	b := strings.Replace(strings.Replace(baseConfig(oa, an, ""), "keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY, UP_KEY2]\n    models: {gpt-4o", 1),
		"    models: {claude-sonnet", limits(200000)+"    models: {claude-sonnet", 1)
	b = strings.Replace(b, "upstreams: [oa, an]", "upstreams: [an, oa]", 1)
	e := env(append(append([]string{}, baseEnv...), reloadEnv...)...)
	ca, err := llmgateway.Parse([]byte(a), e)
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, a, reloadEnv...)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	errs := make(chan string, 100)
	var served sync.Map
	// progress has a value once a request was served since the main loop last took it:
	// each reload waits for one, so reloads and requests interleave without a sleep.
	progress := make(chan struct{}, 1)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 400; i++ {
				model := []string{"gpt-4o", "claude-sonnet", "both"}[(w+i)%3]
				body := `{"model":"` + model + `","stream":` + fmt.Sprint(i%2 == 0) + `,"messages":[{"role":"user","content":"hi"}]}`
				req, _ := http.NewRequest("POST", g.api.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer gw-key-a")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				out := new(strings.Builder)
				_, _ = fmt.Fprint(out, readAll(resp))
				if resp.StatusCode != 200 || (i%2 == 0 && !strings.HasSuffix(out.String(), "data: [DONE]\n\n")) {
					errs <- fmt.Sprintf("%d %s", resp.StatusCode, out)
					return
				}
				served.Store(w*1000+i, true)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	cb, err := llmgateway.Parse([]byte(b), e)
	if err != nil {
		t.Fatal(err)
	}
	// Reload, alternating the two files, until enough requests have gone through; after
	// each reload, a request is served before the next (while the other workers' are in
	// flight), or every worker has ended.
	count := func() int {
		n := 0
		served.Range(func(any, any) bool { n++; return true })
		return n
	}
reloads:
	for i := 0; i < 30 || count() < 300; i++ {
		cfg := ca
		if i%2 == 0 {
			cfg = cb
		}
		if err := g.Reload(cfg); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		select {
		case <-progress:
		case <-workersDone:
			break reloads
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if n := count(); n < 300 {
		t.Fatalf("only %d requests served", n)
	}
	snap := g.Client().Snapshot()
	for _, u := range snap.Upstreams {
		if u.InFlight != 0 {
			t.Fatalf("upstream %s has %d attempts in flight after the load", u.Name, u.InFlight)
		}
	}
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func TestWatchFileReloadsOnChange(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	file := writeConfig(t, baseConfig(oa, an, ""))
	g := startGatewayFile(t, file)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.WatchFile(ctx, file, 5*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	if err := os.WriteFile(file, []byte("upstreams: [broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(g.logs.String(), "reload refused"); i++ {
		if i > 1000 {
			t.Fatal("the broken file was not reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(file, []byte(baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-c", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode == 200 {
			break
		}
		if i > 200 {
			t.Fatal("the change was not picked up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
