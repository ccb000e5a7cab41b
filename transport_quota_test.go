package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/health"
)

// A one-shot answer's quota headers reach the key's report whatever else the answer
// carries: few headers (read in one walk) or many (looked up), with or without the quota
// headers, an encoding or an empty header.
func TestTransportReportsQuotaHeadersOfEveryAnswer(t *testing.T) {
	quota := map[string]string{"X-Ratelimit-Limit-Requests": "600", "X-Ratelimit-Remaining-Requests": "17",
		"X-Ratelimit-Reset-Requests": "30s"}
	filler := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out[fmt.Sprintf("X-Filler-%d", i)] = "x"
		}
		return out
	}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	want := &health.Level{Limit: 600, Remaining: 17, Reset: 30 * time.Second}
	cases := []struct {
		name   string
		header map[string]string
		want   *health.Level
	}{
		{"alone", map[string]string{}, nil},
		{"quota, few headers", quota, want},
		{"one quota header among few", map[string]string{"X-Ratelimit-Remaining-Requests": "17", "Date": "x"},
			&health.Level{Remaining: 17}},
		{"quota, as many headers as walked", merge(quota, filler(3)), want},
		{"quota, more headers than walked", merge(quota, filler(12)), want},
		{"no quota, few headers", filler(3), nil},
		{"no quota, many headers", filler(12), nil},
		{"identity encoding", merge(quota, map[string]string{"Content-Encoding": "identity"}), want},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := rtFunc(func(req *http.Request) (*http.Response, error) {
				if req.Body != nil {
					_, _ = io.Copy(io.Discard, req.Body)
					_ = req.Body.Close()
				}
				h := http.Header{"Content-Type": {"application/json"}}
				for k, v := range tc.header {
					h[k] = []string{v}
				}
				h["X-Empty"] = nil // a key without a value is passed over
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(chatOKBody)),
					ContentLength: int64(len(chatOKBody)), Request: req}, nil
			})
			c, err := llmclient.New(oaiUpstream(t, "oai", "http://api.test/v1"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := post(t, context.Background(), c.Transport(base), "http://api.test/v1/chat/completions", chatReqBody)
			if err != nil {
				t.Fatal(err)
			}
			if body, err := readBody(t, resp); err != nil || body != chatOKBody {
				t.Fatalf("body %q, %v", body, err)
			}
			k := c.Snapshot().Upstreams[0].Keys[0]
			var got *health.Level
			if k.Reported != nil {
				got = k.Reported.Requests
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("reported %+v, want %+v", got, tc.want)
			}
		})
	}
}

const (
	chatReqBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`
	chatOKBody  = `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
)
