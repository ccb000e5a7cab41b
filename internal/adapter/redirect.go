package adapter

import (
	"errors"
	"net/http"
)

// maxRedirects is how many redirects GuardRedirects follows without a CheckRedirect of the
// client's own: net/http's default.
const maxRedirects = 10

// GuardRedirects returns a copy of c, sharing its Transport, that follows a redirect only
// to the host (and port) of the original request, and never from https to http. The
// adapters send credentials in headers such as x-api-key, api-key and x-goog-api-key, which
// net/http forwards on a redirect to any host (it drops only Authorization, Cookie and
// WWW-Authenticate): a misconfigured gateway or a hostile server could otherwise collect a
// key with a 307. A redirect elsewhere is not followed: the 3xx response is returned, and
// the adapter reports it as an error with its status. c's own CheckRedirect, if any, still
// decides on the redirects allowed.
func GuardRedirects(c *http.Client) *http.Client {
	g := *c
	own := c.CheckRedirect
	g.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Host != first.Host || first.Scheme == "https" && req.URL.Scheme != "https" {
			return http.ErrUseLastResponse
		}
		if own != nil {
			return own(req, via)
		}
		if len(via) >= maxRedirects {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &g
}
