package llmgateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's "Not using Go?" commands, run as written from the repository root.
const (
	readmeExport = "export OPENAI_API_KEY=sk-... ANTHROPIC_API_KEY=sk-ant-... LLMGATEWAY_TEAM_KEY=team-key LLMGATEWAY_ADMIN_TOKEN=admin-token"
	readmeStart  = "cd llmgateway && go run ./cmd/llmgateway -config sample.yaml"
	docsInstall  = "(cd llmgateway && go install ./cmd/llmgateway)"
)

// readmeBlock returns the first code block of the README section titled title.
func readmeBlock(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README has no section %q", title)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok := strings.Cut(sec, "```\n")
	if !ok {
		t.Fatalf("README section %q has no code block", title)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// TestReadmeCommandsStartTheGateway runs the two commands of the README's "Not using
// Go?" section verbatim, from the repository root, and asks the started gateway's
// /healthz. It is skipped with -short (it builds the binary) and when the sample's
// ports are taken.
func TestReadmeCommandsStartTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	block := readmeBlock(t, "Not using Go?")
	if block != readmeExport+"\n"+readmeStart+"\n" {
		t.Fatalf("the README's commands changed; update this test with them:\n%s", block)
	}
	if !strings.Contains(string(mustRead(t, filepath.Join("..", "README.md"))), docsInstall) ||
		!strings.Contains(string(mustRead(t, filepath.Join("..", "docs", "gateway.md"))), docsInstall) {
		t.Fatalf("README.md and docs/gateway.md must both give the install command %q", docsInstall)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", readmeExport+"\n"+"exec 2>&1\n"+readmeStart)
	cmd.Dir = ".."
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// go run's child is in the same process group: stop them together.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	var log []string
	for lines.Scan() {
		l := lines.Text()
		log = append(log, l)
		if strings.Contains(l, "address already in use") {
			t.Skip("the sample's ports are taken on this machine: ", l)
		}
		if strings.Contains(l, "llmgateway: serving on 127.0.0.1:8080, admin on 127.0.0.1:8081") {
			break
		}
	}
	if lines.Err() != nil || len(log) == 0 || !strings.Contains(log[len(log)-1], "serving on") {
		t.Fatalf("the gateway did not start: %v\n%s", lines.Err(), strings.Join(log, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	resp, err := http.Get("http://127.0.0.1:8081/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	// A request without the tenant key is refused by the gateway itself.
	resp, err = http.Post("http://127.0.0.1:8080/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"smart","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d, want 401", resp.StatusCode)
	}
}

// TestGoInstallFromACheckout runs the documented install command (go install of
// ./cmd/llmgateway from the module's directory, into a temporary GOBIN) and checks
// the sample configuration with the installed binary. Skipped with -short.
func TestGoInstallFromACheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "bash", "-c", docsInstall)
	install.Dir = ".."
	install.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", docsInstall, err, out)
	}
	check := exec.CommandContext(ctx, filepath.Join(bin, "llmgateway"), "-check", "-config", "sample.yaml")
	check.Env = append(os.Environ(), "OPENAI_API_KEY=k1", "ANTHROPIC_API_KEY=k2", "LLMGATEWAY_TEAM_KEY=k3", "LLMGATEWAY_ADMIN_TOKEN=k4")
	out, err := check.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil || strings.TrimSpace(string(out)) != "configuration ok" {
		t.Fatalf("installed llmgateway -check sample.yaml: %v\n%s", err, out)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
