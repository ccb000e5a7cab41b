package httpx_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/llmclient/llmclient/internal/httpx"
)

func TestDefaultClient(t *testing.T) {
	a, b := httpx.DefaultClient(), httpx.DefaultClient()
	if a == b || a.Transport == b.Transport {
		t.Fatal("DefaultClient must return a fresh client and transport each call")
	}
	if a.Timeout != 0 {
		t.Fatalf("Timeout = %v; want none, it would cut long streams", a.Timeout)
	}
	tr, ok := a.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("Transport is %T", a.Transport)
	}
	if tr.TLSHandshakeTimeout != 10*time.Second || tr.ResponseHeaderTimeout != 10*time.Minute {
		t.Fatalf("timeouts: tls %v, headers %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	if tr.DisableKeepAlives || tr.MaxIdleConnsPerHost < 2 || tr.IdleConnTimeout == 0 {
		t.Fatalf("pool: keepalives disabled %v, per host %d, idle %v", tr.DisableKeepAlives, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout)
	}
	if tr.Proxy == nil || tr.DialContext == nil {
		t.Fatal("proxy and dialer must be set")
	}
	a.CloseIdleConnections()
	b.CloseIdleConnections()
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		max     int64
		want    string
		tooLong bool
	}{
		{"empty", "", 10, "", false},
		{"under", "hello", 10, "hello", false},
		{"exact", "hello", 5, "hello", false},
		{"over by one", "hello!", 5, "hello", true},
		{"far over", strings.Repeat("x", 5000), 100, strings.Repeat("x", 100), true},
		{"zero max", "a", 0, "", true},
		{"negative max", "a", -3, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := httpx.ReadLimited(strings.NewReader(tt.body), tt.max)
			if string(got) != tt.want {
				t.Fatalf("body = %q; want %q", got, tt.want)
			}
			if tt.tooLong != errors.Is(err, httpx.ErrTooLarge) {
				t.Fatalf("err = %v; too large expected %v", err, tt.tooLong)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "httpx: ") {
				t.Fatalf("err %q lacks prefix", err)
			}
		})
	}
}

func TestReadLimitedReadsAtMostMaxPlusOne(t *testing.T) {
	r := &countingReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}
	_, err := httpx.ReadLimited(r, 1000)
	if !errors.Is(err, httpx.ErrTooLarge) {
		t.Fatal(err)
	}
	if r.n != 1001 {
		t.Fatalf("read %d bytes; want 1001", r.n)
	}
}

func TestReadLimitedReadError(t *testing.T) {
	boom := errors.New("boom")
	got, err := httpx.ReadLimited(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("got %q, %v", got, err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

type closeRecorder struct {
	countingReader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestDrainClose(t *testing.T) {
	small := &closeRecorder{countingReader: countingReader{r: strings.NewReader("tail")}}
	httpx.DrainClose(small)
	if !small.closed || small.n != 4 {
		t.Fatalf("small: closed %v, read %d", small.closed, small.n)
	}
	big := &closeRecorder{countingReader: countingReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}}
	httpx.DrainClose(big)
	if !big.closed || big.n != 64<<10 {
		t.Fatalf("big: closed %v, read %d; want 65536", big.closed, big.n)
	}
	httpx.DrainClose(nil) // must not panic
}

func TestJoinURL(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "/chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://api.openai.com/v1/", "chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://api.openai.com/v1//", "//chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"http://localhost:11434/v1", "chat/completions", "http://localhost:11434/v1/chat/completions"},
		{"https://x", "", "https://x"},
	}
	for _, tt := range tests {
		if got := httpx.JoinURL(tt.base, tt.path); got != tt.want {
			t.Errorf("JoinURL(%q, %q) = %q; want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

func TestSnippet(t *testing.T) {
	tests := []struct {
		body string
		n    int
		want string
	}{
		{"", 200, ""},
		{"   \n\t ", 200, ""},
		{"<html>\r\n  <body>502 Bad Gateway</body>\n</html>", 200, "<html> <body>502 Bad Gateway</body> </html>"},
		{"abcdef", 3, "abc"},
		{"héllo", 2, "h"}, // never cut inside a rune
		{"a\x00b\xffc", 200, "a b c"},
		{"plain", 200, "plain"},
	}
	for _, tt := range tests {
		if got := httpx.Snippet([]byte(tt.body), tt.n); got != tt.want {
			t.Errorf("Snippet(%q, %d) = %q; want %q", tt.body, tt.n, got, tt.want)
		}
	}
}

func FuzzSnippet(f *testing.F) {
	f.Add([]byte("<html>502</html>"), 200)
	f.Add([]byte("a\x00b\xffc héllo"), 5)
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		if n < 0 || n > 4096 {
			return
		}
		s := httpx.Snippet(body, n)
		if len(s) > n {
			t.Fatalf("len %d > %d", len(s), n)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || r == '\uFFFD' {
				t.Fatalf("control or invalid rune %q in %q", r, s)
			}
		}
	})
}
