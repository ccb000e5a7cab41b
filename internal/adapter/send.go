package adapter

import (
	"errors"
	"net/http"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/httpx"
)

// Classifier turns a non-2xx response — status, headers and the body read so far — into an
// *llmclient.Error, reading relative header times against now.
type Classifier func(status int, h http.Header, body []byte, now time.Time) *llmclient.Error

// Sender sends one adapter's requests. Set every field; a Sender is safe for concurrent
// use when Client is.
type Sender struct {
	Pkg      string // the adapter's package name, prefixed to transport errors
	Client   *http.Client
	Classify Classifier
}

// Send sends req and returns a 2xx response with its body open; the caller closes it. A
// transport failure is returned as a *NetError ("<pkg>: sending request: …"). Any other
// status has its body read (at most httpx.MaxErrorBody bytes) and closed, and is returned
// as Classify's *llmclient.Error with Model set to model, the read error as its cause when
// the body could not be read (a body cut at the limit is no failure: the status says what
// happened), and key redacted.
func (s *Sender) Send(req *http.Request, model, key string) (*http.Response, error) {
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, &NetError{Pkg: s.Pkg, Op: "sending request", Err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer httpx.DrainClose(resp.Body)
	data, rerr := httpx.ReadLimited(resp.Body, httpx.MaxErrorBody)
	e := s.Classify(resp.StatusCode, resp.Header, data, time.Now())
	e.Model = model
	if rerr != nil && !errors.Is(rerr, httpx.ErrTooLarge) {
		e.Err = rerr
	}
	e.Redact(key)
	return nil, e
}

// ReadBody reads the body of a 2xx response, at most httpx.MaxResponseBody bytes, without
// closing it. A longer body is returned as a Malformed error with requestID and Model set
// to model; a read failure as a *NetError ("<pkg>: reading response: …").
func (s *Sender) ReadBody(resp *http.Response, requestID, model string) ([]byte, error) {
	data, err := httpx.ReadLimited(resp.Body, httpx.MaxResponseBody)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, httpx.ErrTooLarge):
		e := Malformed(s.Pkg, resp.StatusCode, requestID, nil, err)
		e.Model = model
		return nil, e
	}
	return nil, &NetError{Pkg: s.Pkg, Op: "reading response", Err: err}
}
