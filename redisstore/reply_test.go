package redisstore_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// fakeRedis is a loopback server that speaks enough RESP2 for go-redis to connect, and
// answers every script with reply.
type fakeRedis struct {
	l     net.Listener
	reply string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startFakeRedis(t *testing.T, reply string) *fakeRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{l: l, reply: reply}
	f.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeRedis) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		var out string
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			out = "-ERR unknown command 'HELLO'\r\n"
		case "EVALSHA", "EVAL":
			out = f.reply
		case "PING":
			out = "+PONG\r\n"
		default:
			out = "+OK\r\n"
		}
		if _, err := io.WriteString(c, out); err != nil {
			return
		}
	}
}

// store returns a Store in mode on the fake server, closed when the test ends.
func (f *fakeRedis) store(t *testing.T, mode redisstore.FailMode) *redisstore.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: f.l.Addr().String(), ContextTimeoutEnabled: true, Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	s, err := redisstore.New(rdb, redisstore.WithFailMode(mode), redisstore.WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 || line[0] != '*' {
		return nil, errors.New("not a command")
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, errors.New("bad array")
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil || line[0] != '$' {
			return nil, errors.New("not a bulk string")
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil || size < 0 {
			return nil, errors.New("bad bulk string")
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// TestUnexpectedReplies: a server (or a proxy) that answers a script with something else
// than the script returns, here a 16 MB string, is a Redis failure: FailOpen admits
// locally, FailClosed refuses with ErrUnavailable, and the error stays small whatever the
// server sent. The store used to format the whole reply into its error, and to return
// that error under FailOpen too instead of admitting.
func TestUnexpectedReplies(t *testing.T) {
	big := strings.Repeat("x", 16<<20)
	fake := startFakeRedis(t, "$"+strconv.Itoa(len(big))+"\r\n"+big+"\r\n")
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 10, Burst: 10}, BatchShare: 1}
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			s := fake.store(t, mode)
			st := s.Open("garbage", spec)
			_, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
			if s.Healthy() {
				t.Error("the store took an unusable reply for a healthy Redis")
			}
			switch mode {
			case redisstore.FailOpen:
				if err != nil || !ok {
					t.Fatalf("FailOpen Reserve: %v, %v; want a local admission", ok, err)
				}
			case redisstore.FailClosed:
				if !errors.Is(err, redisstore.ErrUnavailable) {
					t.Fatalf("FailClosed Reserve: %.200v; want ErrUnavailable", err)
				}
				if n := len(err.Error()); n > 200 {
					t.Fatalf("the error holds %d bytes of what the server sent", n)
				}
				t.Logf("FailClosed: %v", err)
			}
		})
	}
}
