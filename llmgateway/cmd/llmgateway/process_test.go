package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests in this file build the command once and run it as a process on loopback
// ports, reloading it with SIGHUP, the file watcher and the admin API, and stopping it
// with SIGTERM and SIGINT. They wait on the process's log lines and on its answers,
// each within a bounded deadline, never on a fixed sleep. With -race the gateway is
// built with the race detector too, and a race in it fails its exit status.

var (
	binDir    string // set by TestMain
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// deadline bounds every wait of these tests for the process (a race build on a busy
// machine starts in seconds, not milliseconds).
const deadline = 60 * time.Second

// gatewayBinary builds the command once; it skips the test with -short.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "llmgateway")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// secrets is the process's environment of keys; none of them may ever be written
// to its output.
var secrets = []string{
	"UP_KEY_1", "sk-up-one-7f3a9c0e",
	"UP_KEY_2", "sk-up-two-51be02d4",
	"TENANT_A", "gw-tenant-a-c4d19e",
	"TENANT_B", "gw-tenant-b-88a0f1",
	"TENANT_C", "gw-tenant-c-2b6e77",
	"GW_ADMIN", "gw-admin-e90d3b5a",
	"GW_ADMIN_2", "gw-admin-2-6c1f07",
}

func secret(name string) string {
	for i := 0; i < len(secrets); i += 2 {
		if secrets[i] == name {
			return secrets[i+1]
		}
	}
	panic(name)
}

// upstream is a loopback OpenAI-compatible vendor. A stream of the model "hold" sends
// its first chunk, then waits for release before it ends.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []string
	release chan struct{}
	once    sync.Once
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	t.Cleanup(u.releaseHeld) // runs first: a held stream must end before Close.
	return u
}

func (u *upstream) releaseHeld() { u.once.Do(func() { close(u.release) }) }

func (u *upstream) keysSeen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.keys...)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	u.mu.Lock()
	u.keys = append(u.keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	u.mu.Unlock()
	if !req.Stream {
		w.Header().Set("content-type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, req.Model)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", req.Model, delta, finish)
		w.(http.Flusher).Flush()
	}
	chunk(`{"role":"assistant","content":"Hel"}`, "null")
	if req.Model == "hold" {
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
	}
	chunk(`{"content":"lo"}`, "null")
	chunk(`{}`, `"stop"`)
	io.WriteString(w, "data: [DONE]\n\n")
}

// conf is a configuration of the gateway in front of u: upstream "up" serves gpt-4o
// and hold with the keys named by upKeys, "spare" serves spare-model; tenant a may
// call every model.
type conf struct {
	upKeys  string // default [UP_KEY_1]
	tenants string // more tenant lines
	level   string // default info
	grace   string // default 20s
	admin   string // the admin token's variable, default GW_ADMIN
	extra   string // more top-level lines
}

func (c conf) yaml(u *upstream) string {
	if c.upKeys == "" {
		c.upKeys = "[UP_KEY_1]"
	}
	if c.level == "" {
		c.level = "info"
	}
	if c.grace == "" {
		c.grace = "20s"
	}
	if c.admin == "" {
		c.admin = "GW_ADMIN"
	}
	return fmt.Sprintf(`listen: 127.0.0.1:0
shutdown_grace: %s
admin: {listen: 127.0.0.1:0, token_env: %s}
log: {level: %s}
retry: {backoff_initial: 1ms, backoff_max: 2ms}
upstreams:
  - name: up
    vendor: openai
    base_url: %s/v1
    keys_env: %s
    models: {gpt-4o: gpt-4o, hold: hold}
  - name: spare
    vendor: openai
    base_url: %s/v1
    keys_env: [UP_KEY_1]
    models: {spare-model: gpt-4o}
tenants:
  - {name: a, keys_env: [TENANT_A], models: ["*"]}
%s%s`, c.grace, c.admin, c.level, u.URL, c.upKeys, u.URL, c.tenants, c.extra)
}

const (
	tenantB = "  - {name: b, keys_env: [TENANT_B], models: [gpt-4o]}\n"
	tenantC = "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n"
)

func writeFile(t *testing.T, file, data string) {
	t.Helper()
	// Written whole and renamed into place, as an editor or a deployment does, so that
	// the watcher never reads half a file.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// proc is a running gateway process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	hc     *http.Client
	stdout bytes.Buffer // read after exit only

	mu      sync.Mutex
	lines   []string
	partial []byte
	grew    chan struct{} // closed at each new line
	exited  chan struct{}
	waitErr error

	api, admin string // base URLs
	adminToken string // the variable adminCall takes the token from; default GW_ADMIN
}

// Write takes the process's stderr.
func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.lines = append(p.lines, string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	close(p.grew)
	p.grew = make(chan struct{})
	return len(b), nil
}

// start starts the command with args in dir ("" for the package's) and, unless it is
// a -check or -help run, waits until it serves.
func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	p := launch(t, dir, args...)
	for _, a := range args {
		if a == "-check" || a == "-help" {
			return p
		}
	}
	i := p.waitLine(0, "llmgateway: serving on ")
	addrs := strings.TrimPrefix(p.line(i), "llmgateway: serving on ")
	api, admin, ok := strings.Cut(addrs, ", admin on ")
	if !ok {
		t.Fatalf("no admin address in %q", p.line(i))
	}
	p.api, p.admin = "http://"+api, "http://"+admin
	return p
}

// launch starts the command with args in dir.
func launch(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	bin := gatewayBinary(t)
	tr := &http.Transport{}
	p := &proc{t: t, hc: &http.Client{Transport: tr}, grew: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = os.Environ()
	for i := 0; i < len(secrets); i += 2 {
		p.cmd.Env = append(p.cmd.Env, secrets[i]+"="+secrets[i+1])
	}
	p.cmd.Stderr, p.cmd.Stdout = p, &p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		tr.CloseIdleConnections()
		out := p.output()
		for i := 1; i < len(secrets); i += 2 {
			if strings.Contains(out, secrets[i]) || strings.Contains(p.stdout.String(), secrets[i]) {
				t.Errorf("the output holds the secret of %s:\n%s", secrets[i-1], out)
			}
		}
		if strings.Contains(out, "DATA RACE") {
			t.Errorf("the gateway raced:\n%s", out)
		}
	})
	return p
}

func (p *proc) line(i int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines[i]
}

// mark is the number of lines logged so far: waitLine(p.mark(), …) waits for a line
// logged after now.
func (p *proc) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n") + string(p.partial)
}

// waitLine waits for a line at index from or later holding every one of subs, and
// returns its index.
func (p *proc) waitLine(from int, subs ...string) int {
	p.t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(p.lines[i], s)
			}
			if all {
				p.mu.Unlock()
				return i
			}
		}
		from = max(from, len(p.lines))
		grew := p.grew
		p.mu.Unlock()
		select {
		case <-grew:
		case <-p.exited:
			if p.mark() > from {
				continue
			}
			p.t.Fatalf("the gateway exited (%v) without logging %q:\n%s", p.exitErr(), subs, p.output())
		case <-timeout.C:
			p.t.Fatalf("no line with %q within %v:\n%s", subs, deadline, p.output())
		}
	}
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(deadline):
		p.t.Fatalf("the gateway did not exit within %v:\n%s", deadline, p.output())
	}
	var ee *exec.ExitError
	switch err := p.exitErr(); {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		p.t.Fatal(err)
		return -1
	}
}

func (p *proc) signal(s os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatal(err)
	}
}

// chat sends a chat completion with tenant key (a secret's name, or "") and returns
// the status and body.
func (p *proc) chat(key, model string, stream bool, requestID string) (int, string) {
	p.t.Helper()
	resp, err := p.do(key, model, stream, requestID)
	if err != nil {
		p.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (p *proc) do(key, model string, stream bool, requestID string) (*http.Response, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	req, _ := http.NewRequest(http.MethodPost, p.api+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+secret(key))
	}
	if requestID != "" {
		req.Header.Set("x-request-id", requestID)
	}
	return p.hc.Do(req)
}

// adminCall calls the admin API with the token and returns the status and body.
func (p *proc) adminCall(method, path string) (int, string) {
	p.t.Helper()
	req, _ := http.NewRequest(method, p.admin+path, nil)
	tok := p.adminToken
	if tok == "" {
		tok = "GW_ADMIN"
	}
	req.Header.Set("Authorization", "Bearer "+secret(tok))
	resp, err := p.hc.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// upKeys is the number of keys in upstream up's pool, from the admin snapshot.
func (p *proc) upKeys() int {
	p.t.Helper()
	code, body := p.adminCall("GET", "/admin/snapshot")
	var snap struct {
		Upstreams []struct {
			Name string `json:"name"`
			Keys []any  `json:"keys"`
		} `json:"upstreams"`
	}
	if err := json.Unmarshal([]byte(body), &snap); code != 200 || err != nil {
		p.t.Fatalf("snapshot: %d %v %s", code, err, body)
	}
	for _, u := range snap.Upstreams {
		if u.Name == "up" {
			return len(u.Keys)
		}
	}
	p.t.Fatalf("no upstream up in %s", body)
	return 0
}

func TestCheckValidatesTheFileAndExits(t *testing.T) {
	u := newUpstream(t)
	dir := t.TempDir()
	valid := conf{}.yaml(u)
	for _, tc := range []struct {
		name, file string
		args       []string // after -check; "FILE" is the file written
		code       int
		stdout     string
		stderr     []string
	}{
		{"valid", valid, []string{"-config", "FILE"}, 0, "configuration ok\n", nil},
		{"the default file name", valid, nil, 0, "configuration ok\n", nil},
		{"JSON", `{"listen": "127.0.0.1:0", "open": true, "upstreams": [{"name": "x", "vendor": "openai", "base_url": "http://127.0.0.1:1/v1", "keys_env": ["UP_KEY_1"]}]}`,
			[]string{"-config", "FILE"}, 0, "configuration ok\n", nil},
		{"nothing connected to", valid + "redis: {addr: '127.0.0.1:1'}\ncache: {enabled: true, redis: true}\n",
			[]string{"-config", "FILE"}, 0, "configuration ok\n", nil},
		{"every problem listed", conf{tenants: "  - {name: z, keys_env: [UNSET_VAR], models: ['*']}\n", level: "loud"}.yaml(u),
			[]string{"-config", "FILE"}, 1, "", []string{"2 problem(s)", "UNSET_VAR is not set", `log.level: "loud"`}},
		{"a restart-only option New refuses", valid + "pricing: {file: " + filepath.Join(dir, "nowhere.json") + "}\n",
			[]string{"-config", "FILE"}, 1, "", []string{"pricing.file", "nowhere.json"}},
		{"no file", "", []string{"-config", filepath.Join(dir, "missing.yaml")}, 1, "", []string{"missing.yaml", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			name := "llmgateway.yaml"
			if tc.file != "" {
				writeFile(t, filepath.Join(d, name), tc.file)
			}
			args := []string{"-check"}
			for _, a := range tc.args {
				if a == "FILE" {
					a = filepath.Join(d, name)
				}
				args = append(args, a)
			}
			p := start(t, d, args...)
			if code := p.wait(); code != tc.code {
				t.Errorf("exit code %d, want %d:\n%s", code, tc.code, p.output())
			}
			if got := p.stdout.String(); got != tc.stdout {
				t.Errorf("stdout %q, want %q", got, tc.stdout)
			}
			out := p.output()
			if tc.code == 0 && out != "" {
				t.Errorf("stderr of a valid file: %q", out)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(out, s) {
					t.Errorf("stderr lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestHelpNamesTheFlagsAndSignals(t *testing.T) {
	p := start(t, "", "-help")
	if code := p.wait(); code != 0 {
		t.Errorf("-help: exit code %d", code)
	}
	out := p.output()
	for _, s := range []string{"-config", "-check", "-watch", "SIGHUP", "SIGTERM", "docs/gateway.md"} {
		if !strings.Contains(out, s) {
			t.Errorf("-help lacks %q:\n%s", s, out)
		}
	}
}

// TestSIGHUPReloads follows the documented reload through the command: SIGHUP (and
// POST /admin/reload) applies the file keeping the Client's state; an invalid file,
// or one that needs a restart, is refused, logged with its problems, and changes
// nothing; with -watch 0 a change of the file alone reloads nothing; the log level
// follows the file.
func TestSIGHUPReloads(t *testing.T) {
	u := newUpstream(t)
	file := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, file, conf{}.yaml(u))
	p := start(t, "", "-config", file, "-watch", "0")

	if code, body := p.chat("TENANT_A", "gpt-4o", false, ""); code != 200 {
		t.Fatalf("tenant a: %d %s", code, body)
	}
	if code, body := p.adminCall("POST", "/admin/upstreams/spare/breaker/open"); code != 200 {
		t.Fatalf("breaker/open: %d %s", code, body)
	}
	if code, _ := p.chat("TENANT_A", "spare-model", false, ""); code != 503 {
		t.Fatalf("spare-model with its breaker open: %d", code)
	}
	if code, _ := p.chat("TENANT_B", "gpt-4o", false, ""); code != 401 {
		t.Fatalf("tenant b before the reload: %d", code)
	}

	// A valid change: a new tenant and a new upstream key.
	next := conf{tenants: tenantB, upKeys: "[UP_KEY_2]"}
	writeFile(t, file, next.yaml(u))
	if code, _ := p.chat("TENANT_B", "gpt-4o", false, ""); code != 401 {
		t.Fatalf("with -watch 0, a change of the file alone reloaded it: %d", code)
	}
	m := p.mark()
	p.signal(syscall.SIGHUP)
	p.waitLine(m, "configuration reloaded")
	if code, body := p.chat("TENANT_B", "gpt-4o", false, ""); code != 200 {
		t.Fatalf("tenant b after SIGHUP: %d %s", code, body)
	}
	if keys := u.keysSeen(); keys[len(keys)-1] != secret("UP_KEY_2") {
		t.Fatal("the upstream key was not changed")
	}
	if code, _ := p.chat("TENANT_A", "spare-model", false, ""); code != 503 {
		t.Fatalf("the breaker forced open before the reload was closed by it: %d", code)
	}

	// Refused files: each is logged with its problem and changes nothing.
	for _, tc := range []struct{ name, yaml, want string }{
		{"invalid", conf{tenants: tenantB + tenantC, upKeys: "[UP_KEY_1, UP_KEY_2]"}.yaml(u) + "bogus: 1\n", "field bogus not found"},
		{"unset key", conf{tenants: tenantB + tenantC + "  - {name: d, keys_env: [UNSET_VAR], models: ['*']}\n"}.yaml(u), "UNSET_VAR is not set"},
		{"needs a restart", strings.Replace(conf{tenants: tenantB + tenantC}.yaml(u), "name: spare\n    vendor: openai", "name: spare\n    vendor: anthropic", 1), "upstreams: changing it needs a restart"},
		{"not YAML", "upstreams: [broken", "did not find expected"},
		{"empty", "", "the configuration is empty"},
		{"removed", "REMOVE", "no such file"},
	} {
		if tc.yaml == "REMOVE" {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		} else {
			writeFile(t, file, tc.yaml)
		}
		m := p.mark()
		p.signal(syscall.SIGHUP)
		i := p.waitLine(m, "reload refused")
		if l := p.line(i); !strings.Contains(l, tc.want) {
			t.Errorf("%s: the refusal does not say %q: %s", tc.name, tc.want, l)
		}
		if code, _ := p.chat("TENANT_C", "gpt-4o", false, ""); code != 401 {
			t.Fatalf("%s: tenant c was added: %d", tc.name, code)
		}
		if code, _ := p.chat("TENANT_B", "gpt-4o", false, ""); code != 200 {
			t.Fatalf("%s: tenant b was removed: %d", tc.name, code)
		}
		if n := p.upKeys(); n != 1 {
			t.Fatalf("%s: upstream up has %d keys, want 1", tc.name, n)
		}
		if keys := u.keysSeen(); keys[len(keys)-1] != secret("UP_KEY_2") {
			t.Fatalf("%s: the upstream key changed", tc.name)
		}
	}

	// POST /admin/reload answers a refusal with its problems.
	writeFile(t, file, conf{tenants: tenantB + tenantC}.yaml(u)+"bogus: 1\n")
	if code, body := p.adminCall("POST", "/admin/reload"); code != 400 || !strings.Contains(body, "field bogus not found") {
		t.Fatalf("admin reload of an invalid file: %d %s", code, body)
	}
	if code, _ := p.chat("TENANT_C", "gpt-4o", false, ""); code != 401 {
		t.Fatalf("tenant c was added by a refused admin reload: %d", code)
	}

	// POST /admin/reload reloads the same file, at once.
	writeFile(t, file, conf{tenants: tenantB + tenantC, level: "warn"}.yaml(u))
	if code, body := p.adminCall("POST", "/admin/reload"); code != 200 {
		t.Fatalf("admin reload: %d %s", code, body)
	}
	if code, _ := p.chat("TENANT_C", "gpt-4o", false, "quiet-1"); code != 200 {
		t.Fatalf("tenant c after the admin reload: %d", code)
	}
	writeFile(t, file, conf{tenants: tenantB + tenantC, level: "info"}.yaml(u))
	if code, body := p.adminCall("POST", "/admin/reload"); code != 200 {
		t.Fatalf("admin reload: %d %s", code, body)
	}
	if code, _ := p.chat("TENANT_C", "gpt-4o", false, "loud-1"); code != 200 {
		t.Fatalf("tenant c: %d", code)
	}
	// The admin token changes too.
	writeFile(t, file, conf{tenants: tenantB + tenantC, admin: "GW_ADMIN_2"}.yaml(u))
	m = p.mark()
	p.signal(syscall.SIGHUP)
	p.waitLine(m, "configuration reloaded")
	if code, _ := p.adminCall("GET", "/admin/snapshot"); code != 401 {
		t.Fatalf("the old admin token after the reload: %d", code)
	}
	p.adminToken = "GW_ADMIN_2"
	if code, _ := p.adminCall("GET", "/admin/snapshot"); code != 200 {
		t.Fatalf("the new admin token after the reload: %d", code)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.output())
	}
	out := p.output()
	if !strings.Contains(out, `"request_id":"loud-1"`) || strings.Contains(out, `"request_id":"quiet-1"`) {
		t.Fatalf("the access log did not follow log.level (warn, then info):\n%s", out)
	}
}

// TestWatchReloadsTheChangedFile: -watch polls the file; an invalid change is refused
// and logged, a valid one applied.
func TestWatchReloadsTheChangedFile(t *testing.T) {
	u := newUpstream(t)
	file := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, file, conf{}.yaml(u))
	p := start(t, "", "-config", file, "-watch", "10ms")
	m := p.mark()
	writeFile(t, file, conf{tenants: tenantB}.yaml(u)+"bogus: 1\n")
	p.waitLine(m, "reload refused", "field bogus not found")
	if code, _ := p.chat("TENANT_B", "gpt-4o", false, ""); code != 401 {
		t.Fatalf("tenant b from a refused file: %d", code)
	}
	if code, _ := p.chat("TENANT_A", "gpt-4o", false, ""); code != 200 {
		t.Fatalf("tenant a after a refused file: %d", code)
	}
	m = p.mark()
	writeFile(t, file, conf{tenants: tenantB}.yaml(u))
	p.waitLine(m, "configuration reloaded")
	if code, body := p.chat("TENANT_B", "gpt-4o", false, ""); code != 200 {
		t.Fatalf("tenant b after the change: %d %s", code, body)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.output())
	}
}

// openStream starts a stream of the model hold and returns it after its first chunk.
func openStream(t *testing.T, p *proc, id string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp, err := p.do("TENANT_A", "hold", true, id)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || !strings.Contains(first, "Hel") {
		t.Fatalf("first chunk: %q %v", first, err)
	}
	return resp, r
}

// readRest reads the rest of a stream, within the deadline.
func readRest(t *testing.T, resp *http.Response, r *bufio.Reader) string {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	c := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		c <- result{b, err}
	}()
	select {
	case res := <-c:
		return string(res.b)
	case <-time.After(deadline):
		resp.Body.Close()
		<-c
		t.Fatalf("the stream did not end within %v", deadline)
		return ""
	}
}

// waitRefused waits until the admin listener refuses connections: shutdown began.
func waitRefused(t *testing.T, p *proc) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		resp, err := p.hc.Get(p.admin + "/readyz")
		if err != nil {
			return
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the gateway still serves after the signal")
		}
		select {
		case <-p.exited:
			t.Fatalf("the gateway exited with a stream in flight:\n%s", p.output())
		case <-time.After(time.Millisecond):
		}
	}
}

// TestSignalsDrainStreamsInFlight: SIGTERM and SIGINT stop accepting and wait for the
// stream in flight, which ends cleanly; the process exits 0 with the access log
// written.
func TestSignalsDrainStreamsInFlight(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			u := newUpstream(t)
			file := filepath.Join(t.TempDir(), "gw.yaml")
			writeFile(t, file, conf{}.yaml(u))
			p := start(t, "", "-config", file)
			resp, r := openStream(t, p, "drained-1")
			defer resp.Body.Close()
			p.signal(sig)
			waitRefused(t, p)
			if _, err := p.do("TENANT_A", "gpt-4o", false, ""); err == nil {
				t.Fatal("a new connection was served during the drain")
			}
			u.releaseHeld()
			if rest := readRest(t, resp, r); !strings.HasSuffix(rest, "data: [DONE]\n\n") {
				t.Fatalf("the drained stream: %q", rest)
			}
			if code := p.wait(); code != 0 {
				t.Fatalf("exit code %d:\n%s", code, p.output())
			}
			p.waitLine(0, `"request_id":"drained-1"`, `"status":200`)
		})
	}
}

// TestShutdownGraceCutsStreams: a stream still open after shutdown_grace (changed by
// a reload from 10 minutes to 100ms) is cut, the caller sees no end marker, and the
// command says so.
func TestShutdownGraceCutsStreams(t *testing.T) {
	u := newUpstream(t)
	file := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, file, conf{grace: "10m"}.yaml(u))
	p := start(t, "", "-config", file)
	writeFile(t, file, conf{grace: "100ms"}.yaml(u))
	if code, body := p.adminCall("POST", "/admin/reload"); code != 200 {
		t.Fatalf("admin reload: %d %s", code, body)
	}
	resp, r := openStream(t, p, "cut-1")
	defer resp.Body.Close()
	p.signal(syscall.SIGTERM)
	expectCut(t, p, resp, r, "cut-1", "context deadline exceeded")
}

// expectCut checks a stream cut at shutdown: it ends without [DONE], the gateway exits 1
// after logging why the drain ended (a drain that cut requests is not a clean one), and
// the cut request has its access log line.
func expectCut(t *testing.T, p *proc, resp *http.Response, r *bufio.Reader, id, why string) {
	t.Helper()
	rest := readRest(t, resp, r)
	if strings.Contains(rest, "[DONE]") {
		t.Fatalf("a stream cut at shutdown ended cleanly: %q", rest)
	}
	code := p.wait()
	p.waitLine(0, "llmgateway: shutdown: "+why)
	if code != 1 {
		t.Fatalf("exit code %d after a drain that cut a request, want 1:\n%s", code, p.output())
	}
	p.waitLine(0, `"request_id":"`+id+`"`, `"class":"canceled"`)
}

// TestReloadUnderLoadThroughTheCommand sends requests, one-shot and streams, from
// several workers while SIGHUP reloads two files in turn, an invalid one in the
// middle: no request fails, and the invalid file changes nothing.
func TestReloadUnderLoadThroughTheCommand(t *testing.T) {
	u := newUpstream(t)
	file := filepath.Join(t.TempDir(), "gw.yaml")
	one := conf{tenants: tenantB, upKeys: "[UP_KEY_1]"}.yaml(u)
	two := conf{tenants: tenantB, upKeys: "[UP_KEY_1, UP_KEY_2]", extra: "max_request_bytes: 100000\n"}.yaml(u)
	bad := conf{tenants: tenantB + tenantC, upKeys: "[UP_KEY_2]"}.yaml(u) + "bogus: 1\n"
	writeFile(t, file, one)
	p := start(t, "", "-config", file, "-watch", "0")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	served := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := []string{"TENANT_A", "TENANT_B"}[(w+i)%2]
				stream := i%3 == 0
				resp, err := p.do(key, "gpt-4o", stream, "")
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case resp.StatusCode != 200 || (stream && !bytes.HasSuffix(body, []byte("data: [DONE]\n\n"))):
					failures = append(failures, fmt.Sprintf("%d %s", resp.StatusCode, body))
				default:
					served++
				}
				mu.Unlock()
			}
		}()
	}
	const reloads = 12
	for i := range reloads {
		data, want := one, "configuration reloaded"
		switch {
		case i == reloads/2:
			data, want = bad, "reload refused"
		case i%2 == 0:
			data = two
		}
		writeFile(t, file, data)
		m := p.mark()
		p.signal(syscall.SIGHUP)
		p.waitLine(m, want)
		if i == reloads/2 {
			// The file before it was one: one key, no tenant c.
			if n := p.upKeys(); n != 1 {
				t.Errorf("after the invalid file, up has %d keys, want 1", n)
			}
			if code, _ := p.chat("TENANT_C", "gpt-4o", false, ""); code != 401 {
				t.Errorf("after the invalid file, tenant c: %d, want 401", code)
			}
		}
	}
	close(stop)
	wg.Wait()
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.output())
	}
	if len(failures) > 0 {
		t.Fatalf("%d requests failed (of %d), first: %s", len(failures), len(failures)+served, failures[0])
	}
	if served < 2*reloads {
		t.Fatalf("only %d requests served", served)
	}
	t.Logf("%d requests served across %d reloads", served, reloads)
}

// TestListenerInUseExits: a listener that cannot be opened stops the command with
// exit code 1 and the error.
func TestListenerInUseExits(t *testing.T) {
	u := newUpstream(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, file, strings.Replace(conf{}.yaml(u), "listen: 127.0.0.1:0\n", "listen: "+l.Addr().String()+"\n", 1))
	p := start(t, "", "-config", file, "-check")
	if code := p.wait(); code != 0 {
		t.Fatalf("-check: exit code %d:\n%s", code, p.output())
	}
	p = launch(t, "", "-config", file)
	if code := p.wait(); code != 1 || !strings.Contains(p.output(), "address already in use") {
		t.Fatalf("exit code %d, want 1 with the error:\n%s", code, p.output())
	}
}

// TestSecondSignalCutsTheDrain: a second SIGINT or SIGTERM during the drain cuts the
// streams still open and stops the command at once, whatever shutdown_grace is left.
func TestSecondSignalCutsTheDrain(t *testing.T) {
	u := newUpstream(t)
	file := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, file, conf{grace: "10m"}.yaml(u))
	p := start(t, "", "-config", file)
	resp, r := openStream(t, p, "cut-2")
	defer resp.Body.Close()
	p.signal(syscall.SIGTERM)
	waitRefused(t, p)
	p.signal(syscall.SIGINT)
	expectCut(t, p, resp, r, "cut-2", "context canceled")
}
