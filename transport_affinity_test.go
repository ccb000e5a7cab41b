package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/routing"
)

// seenBy records "host/credential" for each request an in-process upstream answers, and
// answers after 100 ms of virtual time, so that calls made at once are in flight together.
type seenBy struct {
	mu   sync.Mutex
	seen []string
}

func (s *seenBy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, r.URL.Host+"/"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	s.mu.Unlock()
	select {
	case <-time.After(100 * time.Millisecond):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, chatOK)
}

// transportGroup is a least-in-flight model group "chat" of three OpenAI upstreams with
// two keys each, behind a Transport whose requests reach s.
func transportGroup(t *testing.T, s *seenBy, opts ...llmclient.Option) http.RoundTripper {
	t.Helper()
	hosts := hostMux{}
	var names []string
	for _, n := range []string{"a", "b", "c"} {
		opts = append(opts, oaiUpstream(t, n, "http://"+n+".test/v1", "sk-"+n+"1", "sk-"+n+"2"))
		hosts[n+".test"] = s
		names = append(names, n)
	}
	opts = append(opts, llmclient.WithModelGroup("chat", names...), llmclient.WithRouting("chat", routing.LeastInFlight))
	return newClient(t, opts...).Transport(memTransport{hosts})
}

// prefixedChat is a Chat Completions body whose system prompt repeats doc to about 5,000
// bytes, followed by the question q; extra is added to the top level.
func prefixedChat(doc, q, extra string) string {
	sys := strings.Repeat(doc+" ", 5000/(len(doc)+1)+1)
	return fmt.Sprintf(`{"model":"chat",%s"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`, extra, sys, q)
}

// sendAll posts the bodies at once through rt to a.test and returns where each went.
func sendAll(t *testing.T, s *seenBy, rt http.RoundTripper, bodies []string) map[string]int {
	t.Helper()
	s.mu.Lock()
	s.seen = s.seen[:0]
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Go(func() {
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", b)
			if err != nil {
				t.Errorf("RoundTrip: %v", err)
				return
			}
			if _, err := readBody(t, resp); err != nil || resp.StatusCode != 200 {
				t.Errorf("status %d, %v", resp.StatusCode, err)
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return distinct(s.seen)
}

// TestTransportCacheAffinity: through the Transport, requests sent at once that share a
// long prefix reach one upstream and one key of a least-in-flight group; different
// prefixes spread over the upstreams; requests with one prompt_cache_key share an upstream
// and key whatever their prompts. Without WithCacheAffinity the group spreads them.
func TestTransportCacheAffinity(t *testing.T) {
	shared := make([]string, 9)
	for i := range shared {
		shared[i] = prefixedChat("Terms of service", fmt.Sprintf("question %d?", i), "")
	}
	synctest.Test(t, func(t *testing.T) {
		s := &seenBy{}
		rt := transportGroup(t, s, llmclient.WithCacheAffinity(4096))
		if got := sendAll(t, s, rt, shared); len(got) != 1 {
			t.Errorf("requests sharing a prefix went to %v, want one upstream and key", got)
		}
		var many []string
		for i := range 30 {
			many = append(many, prefixedChat(fmt.Sprintf("manual %d", i), "q?", ""))
		}
		ups := map[string]bool{}
		for k := range sendAll(t, s, rt, many) {
			ups[strings.SplitN(k, "/", 2)[0]] = true
		}
		if len(ups) != 3 {
			t.Errorf("30 prefixes went to upstreams %v, want all three", ups)
		}
		var keyed []string
		for i := range 8 {
			keyed = append(keyed, fmt.Sprintf(`{"model":"chat","prompt_cache_key":"tenant-9","messages":[{"role":"user","content":"short %d"}]}`, i))
		}
		if got := sendAll(t, s, rt, keyed); len(got) != 1 {
			t.Errorf("requests with one prompt_cache_key went to %v, want one upstream and key", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := &seenBy{}
		rt := transportGroup(t, s)
		if got := sendAll(t, s, rt, shared); len(got) == 1 {
			t.Errorf("without affinity, 9 requests at once went to %v", got)
		}
	})
}
