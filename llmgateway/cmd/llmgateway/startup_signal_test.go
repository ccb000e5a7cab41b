package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// heldStart launches the gateway (with args, default -watch 0) with a named pipe as its
// price file and returns once the gateway has opened it, while it builds: the process,
// the pipe's writing end, the configuration file and a plain price file beside it.
func heldStart(t *testing.T, args ...string) (p *proc, w *os.File, file, plain string, u *upstream) {
	t.Helper()
	if signal.Ignored(syscall.SIGHUP) {
		// This test process started with SIGHUP ignored (nohup, a job control shell),
		// which the gateway would inherit. A handler is not inherited across exec: with
		// one here the gateway starts with the default action, as under a supervisor.
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGHUP)
		defer signal.Stop(c)
	}
	u = newUpstream(t)
	dir := t.TempDir()
	pipe := filepath.Join(dir, "prices.json")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	plain = filepath.Join(dir, "prices-plain.json")
	if err := os.WriteFile(plain, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "gw.yaml")
	writeFile(t, file, conf{extra: "pricing: {file: " + pipe + "}\n"}.yaml(u))
	if len(args) == 0 {
		args = []string{"-watch", "0"}
	}
	p = launch(t, "", append([]string{"-config", file}, args...)...)

	opened := make(chan *os.File, 1)
	go func() {
		w, err := os.OpenFile(pipe, os.O_WRONLY, 0) // returns once the gateway opened it
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	select {
	case w = <-opened:
	case <-p.exited:
		t.Fatalf("the gateway exited before it read its price file (%v):\n%s", p.exitErr(), p.output())
	case <-time.After(deadline):
		t.Fatalf("the gateway did not open its price file within %v:\n%s", deadline, p.output())
	}
	return p, w, file, plain, u
}

// A SIGHUP that arrives while the gateway is still starting is a reload once it serves,
// not the end of the process (Go's default action for a signal nobody asked for). The
// start is held at a known point: the price file is a named pipe, which the gateway opens
// while it builds, after reading its configuration; opening the pipe's other end returns
// once it has.
func TestSIGHUPWhileStartingIsAReload(t *testing.T) {
	p, w, file, plain, u := heldStart(t)
	// The gateway is building; the file it reloads from names a plain price file.
	writeFile(t, file, conf{extra: "pricing: {file: " + plain + "}\n"}.yaml(u))
	p.signal(syscall.SIGHUP)
	if _, err := w.WriteString("[]"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	i := p.waitLine(0, "llmgateway: serving on ")
	api, _, _ := strings.Cut(strings.TrimPrefix(p.line(i), "llmgateway: serving on "), ", admin on ")
	p.api = "http://" + api
	p.waitLine(0, "reload") // "configuration reloaded" or "reload refused": handled either way
	if code, body := p.chat("TENANT_A", "gpt-4o", false, ""); code != 200 {
		t.Fatalf("after the SIGHUP at start: %d %s", code, body)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM:\n%s", code, p.output())
	}
}

// SIGINT and SIGTERM keep their default action until the gateway serves: they end a
// start that hangs.
func TestSIGTERMWhileStartingEndsIt(t *testing.T) {
	p, w, _, _, _ := heldStart(t)
	defer w.Close()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(deadline):
		t.Fatalf("a SIGTERM did not end the start within %v:\n%s", deadline, p.output())
	}
	if err := p.exitErr(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("exit: %v", err)
	}
}

// A -check run ignores a SIGHUP: it reloads nothing, and Go's default action would end
// it before it could say whether the file is valid.
func TestSIGHUPDuringCheckIsIgnored(t *testing.T) {
	p, w, _, _, _ := heldStart(t, "-check")
	p.signal(syscall.SIGHUP)
	if _, err := w.WriteString("[]"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 || !strings.Contains(p.stdout.String(), "configuration ok") {
		t.Fatalf("-check after a SIGHUP: exit %d (%v), stdout %q:\n%s", code, p.exitErr(), p.stdout.String(), p.output())
	}
}
