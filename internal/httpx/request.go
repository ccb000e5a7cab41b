package httpx

import (
	"bytes"
	"context"
	"net/http"
)

// UserAgent is the User-Agent the adapters send unless a WithHeader option sets one.
const UserAgent = "llmclient-go"

// MaxResponseBody is the most an adapter reads of a successful one-shot response body:
// 32 MiB, far above any real response, so a broken or hostile server cannot exhaust memory.
const MaxResponseBody = 32 << 20

// NewPost returns a POST of the JSON body to url. It carries header's fields (shared, not
// copied: the caller must not modify the request's header values in place), then
// Content-Type: application/json, Accept: text/event-stream for a stream or
// application/json otherwise, and User-Agent: UserAgent unless header has one. The caller
// adds the credential.
//
// extra, when not nil, is a call's own headers (llmclient.Call.Headers): they are set
// after header and before Content-Type and Accept; the caller sets the credential last, so
// that no extra header can replace it.
func NewPost(ctx context.Context, url string, body []byte, header http.Header, stream bool, extra ...http.Header) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	for _, h := range extra {
		for k, v := range h {
			req.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	return req, nil
}
