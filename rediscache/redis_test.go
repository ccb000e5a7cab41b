package rediscache_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/rediscache"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server child process on a free loopback port, for one test.
type redisServer struct {
	t    testing.TB
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  bytes.Buffer
}

// startRedis starts a redis-server found on PATH, without persistence, and stops it when
// the test ends. Without redis-server the test is skipped, unless CI is "true".
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH; .ci/run installs it (apt-get install redis-server)")
		}
		t.Skip("redis-server is not on PATH: install it to run these tests (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{t: t, port: port}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	t.Cleanup(s.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 7)
			if _, err = c.Write([]byte("PING\r\n")); err == nil {
				_, err = c.Read(buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return s
			}
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr(), err, s.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// stop kills the server and waits for it.
func (s *redisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// client returns a go-redis client of the server, closed when the test ends.
func (s *redisServer) client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

func (s *redisServer) store(opts ...rediscache.Option) (*rediscache.Store, *redis.Client) {
	s.t.Helper()
	rdb := s.client()
	st, err := rediscache.New(rdb, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	return st, rdb
}
