// Command stacks: three bare proxies to the gwload mock, to compare HTTP stacks with
// net/http (gwload proxy) under the gateway benchmark (run.sh beside this file).
//
//	stacks fhproxy -listen 127.0.0.1:9105   fasthttp server + fasthttp HostClient
//	stacks nhfc    -listen 127.0.0.1:9106   net/http server + fasthttp client as http.RoundTripper
//	stacks fhnc    -listen 127.0.0.1:9107   fasthttp server + net/http client
//
// Each forwards POST <path> to -upstream with the body and Content-Type, and copies
// the status, Content-Type and body back; a text/event-stream answer is streamed,
// one flush per read of the upstream body, the rest is buffered.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: stacks fhproxy|nhfc|fhnc [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9105", "address")
	upstream := fs.String("upstream", "http://127.0.0.1:9100", "upstream origin")
	_ = fs.Parse(os.Args[2:])
	origin := strings.TrimSuffix(*upstream, "/")
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "stacks", os.Args[1], "on", ln.Addr(), "to", origin)
	switch os.Args[1] {
	case "fhproxy":
		err = fhServer(ln, fhproxyHandler(origin, newHostClient(origin)))
	case "nhfc":
		err = nhServer(ln, &http.Client{Transport: &fhRoundTripper{hc: newHostClient(origin)}}, origin)
	case "fhnc":
		err = fhServer(ln, fhncHandler(origin, newNetClient()))
	default:
		err = fmt.Errorf("unknown %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func newHostClient(origin string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                     strings.TrimPrefix(origin, "http://"),
		MaxConns:                 1024,
		MaxIdleConnDuration:      30 * time.Second,
		StreamResponseBody:       true,
		NoDefaultUserAgentHeader: true,
	}
}

func newNetClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}
}

func fhServer(ln net.Listener, h fasthttp.RequestHandler) error {
	s := &fasthttp.Server{
		Handler:               h,
		NoDefaultServerHeader: true,
		ReadTimeout:           0,
		IdleTimeout:           60 * time.Second,
	}
	return s.Serve(ln)
}

var eventStream = []byte("text/event-stream")

// releasingBody is a fasthttp client response's body stream that, closed by the
// server after it has written it, releases the connection and the Response.
type releasingBody struct{ resp *fasthttp.Response }

func (b *releasingBody) Read(p []byte) (int, error) { return b.resp.BodyStream().Read(p) }
func (b *releasingBody) Close() error {
	err := b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	b.resp = nil
	return err
}

// (a) fasthttp server + fasthttp client.
func fhproxyHandler(origin string, hc *fasthttp.HostClient) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsPost() {
			ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
			return
		}
		req := fasthttp.AcquireRequest()
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(origin + string(ctx.Path()))
		req.Header.SetContentTypeBytes(ctx.Request.Header.ContentType())
		req.SetBodyRaw(ctx.PostBody())
		resp := fasthttp.AcquireResponse()
		err := hc.Do(req, resp)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ct := resp.Header.ContentType()
		ctx.Response.Header.SetContentTypeBytes(ct)
		if bytes.HasPrefix(ct, eventStream) {
			// Written after the handler returns: chunked, one chunk and flush per read.
			ctx.Response.SetBodyStream(&releasingBody{resp}, -1)
			return
		}
		_, err = io.Copy(ctx.Response.BodyWriter(), resp.BodyStream())
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		if err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}
}

// (c) fasthttp server + net/http client.
func fhncHandler(origin string, hc *http.Client) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsPost() {
			ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
			return
		}
		body := bytes.Clone(ctx.PostBody())
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, origin+string(ctx.Path()), bytes.NewReader(body))
		if err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			return
		}
		req.Header.Set("Content-Type", string(ctx.Request.Header.ContentType()))
		resp, err := hc.Do(req)
		if err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode)
		ct := resp.Header.Get("Content-Type")
		ctx.Response.Header.SetContentType(ct)
		if strings.HasPrefix(ct, "text/event-stream") {
			ctx.Response.SetBodyStream(resp.Body, -1) // closed by the server when written
			return
		}
		_, err = io.Copy(ctx.Response.BodyWriter(), resp.Body)
		resp.Body.Close()
		if err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}
}

// (b) net/http server (gwload proxy's handler, verbatim) with hc's transport.
func nhServer(ln net.Listener, hc *http.Client, origin string) error {
	h := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, origin+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		f := w.(http.Flusher)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				f.Flush()
			}
			if err != nil {
				return
			}
		}
	}
	return (&http.Server{Handler: http.HandlerFunc(h), ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// fhRoundTripper is a fasthttp HostClient as an http.RoundTripper: the request body is
// read whole, the response body is streamed (released when the caller closes it).
// No context cancellation beyond closing the body, no HTTP/2, no proxy support.
type fhRoundTripper struct{ hc *fasthttp.HostClient }

func (t *fhRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.String())
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			fasthttp.ReleaseRequest(req)
			return nil, err
		}
		req.SetBodyRaw(b)
	}
	resp := fasthttp.AcquireResponse()
	err := t.hc.Do(req, resp)
	fasthttp.ReleaseRequest(req)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		return nil, err
	}
	h := make(http.Header, 4)
	for k, v := range resp.Header.All() {
		h.Add(string(k), string(v))
	}
	cl := int64(resp.Header.ContentLength())
	if cl < 0 {
		cl = -1
		h.Del("Content-Length")
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", resp.StatusCode(), http.StatusText(resp.StatusCode())), StatusCode: resp.StatusCode(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &rtBody{resp: resp}, ContentLength: cl, Request: r,
	}, nil
}

type rtBody struct{ resp *fasthttp.Response }

func (b *rtBody) Read(p []byte) (int, error) {
	if b.resp == nil {
		return 0, errors.New("read after close")
	}
	return b.resp.BodyStream().Read(p)
}

func (b *rtBody) Close() error {
	if b.resp == nil {
		return nil
	}
	err := b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	b.resp = nil
	return err
}
