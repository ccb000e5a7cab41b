package redisstore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server child process on a free loopback port, for one test.
type redisServer struct {
	t    testing.TB
	port int
	dir  string
	cfg  serverConfig

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
	out    lockedBuffer
}

// lockedBuffer is the server's output, written by exec's copying goroutine and read by
// the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// serverConfig shapes a redis-server beyond the defaults (no persistence, loopback only).
type serverConfig struct {
	// args are more command-line arguments.
	args []string
	// tls, when set, makes the server listen with TLS only, and is the client side of the
	// handshake that checks it is up; args must name the certificates.
	tls *tls.Config
	// sentinel runs the server as a Sentinel with this configuration file's text.
	sentinel string
	// skip, when set, skips the test with this reason (and the server's output) instead of
	// failing it when the server exits at start or does not speak TLS: for features a
	// build may lack.
	skip string
}

// startRedis starts a redis-server found on PATH, without persistence, and stops it when
// the test ends. Without redis-server the test is skipped, unless CI is "true".
func startRedis(t testing.TB) *redisServer { return startRedisWith(t, serverConfig{}) }

// startRedisWith starts a redis-server shaped by cfg, like startRedis.
func startRedisWith(t testing.TB, cfg serverConfig) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH; .ci/run installs it (apt-get install redis-server)")
		}
		t.Skip("redis-server is not on PATH: install it to run these tests " +
			"(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)")
	}
	s := &redisServer{t: t, port: freePort(t), dir: t.TempDir(), cfg: cfg}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// argv returns the server's command line.
func (s *redisServer) argv() []string {
	port := strconv.Itoa(s.port)
	if s.cfg.sentinel != "" {
		conf := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(s.cfg.sentinel), 0o600); err != nil {
			s.t.Fatal(err)
		}
		return append([]string{conf, "--sentinel", "--port", port, "--bind", "127.0.0.1", "--dir", s.dir}, s.cfg.args...)
	}
	a := []string{"--port", port}
	if s.cfg.tls != nil {
		a = []string{"--port", "0", "--tls-port", port}
	}
	a = append(a, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir)
	return append(a, s.cfg.args...)
}

// start runs the server and waits until it answers PING.
func (s *redisServer) start() {
	s.t.Helper()
	s.mu.Lock()
	s.out.Reset()
	cmd := exec.Command("redis-server", s.argv()...)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ping()
		if err == nil {
			return
		}
		select {
		case <-exited:
			s.mu.Lock()
			out := s.out.String()
			s.cmd = nil
			s.mu.Unlock()
			if s.cfg.skip != "" {
				s.t.Skipf("%s: redis-server exited: %v\n%s", s.cfg.skip, cmd.ProcessState, out)
			}
			s.t.Fatalf("redis-server %q exited: %v\n%s", s.argv(), cmd.ProcessState, out)
		default:
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			out := s.out.String()
			s.mu.Unlock()
			var notTLS tls.RecordHeaderError
			if s.cfg.skip != "" && errors.As(err, &notTLS) {
				s.stop()
				s.t.Skipf("%s: redis-server on %s does not speak TLS: %v\n%s", s.cfg.skip, s.addr(), err, out)
			}
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr(), err, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping sends PING and reads +PONG, over TLS when the server uses it.
func (s *redisServer) ping() error {
	c, err := net.DialTimeout("tcp", s.addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if s.cfg.tls != nil {
		cfg := s.cfg.tls.Clone()
		cfg.ServerName = "127.0.0.1"
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		c = tc
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf)
	}
	return nil
}

// stop kills the server and waits for it.
func (s *redisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // in case it was frozen
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// freeze stops the server process without closing its connections: calls hang. It
// returns once the process is stopped (a signal is delivered asynchronously): from then
// on no command is answered.
func (s *redisServer) freeze() {
	s.signal(syscall.SIGSTOP)
	s.mu.Lock()
	pid := 0
	if s.cmd != nil {
		pid = s.cmd.Process.Pid
	}
	s.mu.Unlock()
	if pid == 0 {
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return // no /proc: as before, the signal is on its way
		}
		// The state follows the command's name in parentheses: "T" once stopped.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
}

// thaw resumes a frozen server.
func (s *redisServer) thaw() { s.signal(syscall.SIGCONT) }

func (s *redisServer) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// client returns a go-redis client of the server, closed when the test ends.
func (s *redisServer) client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), ContextTimeoutEnabled: true})
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// store returns a Store with its own connection to the server, closed when the test ends.
// Its timeout is three seconds unless opts say otherwise: a call slower than the default
// on a loaded machine is not what the tests that do not set it are about.
func (s *redisServer) store(opts ...redisstore.Option) *redisstore.Store {
	s.t.Helper()
	st, err := redisstore.New(s.client(), append([]redisstore.Option{redisstore.WithTimeout(3 * time.Second)}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { st.Close() })
	return st
}

// ctx returns a context for one store call in a test: a guard against hangs, far longer
// than any call takes on a loaded machine.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
