package redisstore_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
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

	mu  sync.Mutex
	cmd *exec.Cmd
	out bytes.Buffer
}

// startRedis starts a redis-server found on PATH, without persistence, and stops it when
// the test ends. Without redis-server the test is skipped, unless CI is "true".
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH; .ci/run installs it (apt-get install redis-server)")
		}
		t.Skip("redis-server is not on PATH: install it to run these tests " +
			"(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{t: t, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server and waits until it answers PING.
func (s *redisServer) start() {
	s.t.Helper()
	s.mu.Lock()
	s.out.Reset()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			if err == nil {
				_, err = c.Read(buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			out := s.out.String()
			s.mu.Unlock()
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr(), err, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	s.cmd.Wait()
	s.cmd = nil
}

// freeze stops the server process without closing its connections: calls hang.
func (s *redisServer) freeze() { s.signal(syscall.SIGSTOP) }

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
func (s *redisServer) store(opts ...redisstore.Option) *redisstore.Store {
	s.t.Helper()
	st, err := redisstore.New(s.client(), opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { st.Close() })
	return st
}

// ctx returns a context for one store call in a test.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}
