package llmclient

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/llmclient/llmclient/internal/headers"
)

// txUpstream is an upstream the transport can reach: its Dialect and parsed base URL.
type txUpstream struct {
	up     *upstream
	self   []*upstream // the route of a call that can go nowhere else
	d      Dialect
	scheme string
	host   string // lower case, default port removed
	path   string // decoded base path, no trailing slash
	raw    string // escaped base path, no trailing slash
	flavor refusalFlavor
}

func newTxUpstream(up *upstream, d Dialect) (*txUpstream, bool) {
	u, err := url.Parse(d.BaseURL())
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, false
	}
	scheme := strings.ToLower(u.Scheme)
	return &txUpstream{
		up:     up,
		self:   []*upstream{up},
		d:      d,
		scheme: scheme,
		host:   canonicalHost(scheme, u.Host),
		path:   strings.TrimRight(u.Path, "/"),
		raw:    strings.TrimRight(u.EscapedPath(), "/"),
		flavor: flavorOf(d),
	}, true
}

// canonicalHost lower-cases host and drops the scheme's default port.
func canonicalHost(scheme, host string) string {
	host = strings.ToLower(host)
	switch {
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		return strings.TrimSuffix(host, ":443")
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		return strings.TrimSuffix(host, ":80")
	}
	return host
}

// match returns the upstream whose base URL holds u, the longest base path first. Scheme
// and host compare without regard to case, a default port left out or not.
func (t *Transport) match(u *url.URL) *txUpstream {
	if u == nil || len(t.ups) == 0 {
		return nil
	}
	for _, tu := range t.ups {
		if tu.scheme != u.Scheme && !strings.EqualFold(tu.scheme, u.Scheme) || !tu.sameHost(u.Host) {
			continue
		}
		if tu.path == "" || u.Path == tu.path || (strings.HasPrefix(u.Path, tu.path) && u.Path[len(tu.path)] == '/') {
			return tu
		}
	}
	return nil
}

// sameHost reports whether host (as a URL carries it) is tu's host: canonicalHost without
// building the lower-case string.
func (tu *txUpstream) sameHost(host string) bool {
	switch tu.scheme {
	case "https":
		host = strings.TrimSuffix(host, ":443")
	case "http":
		host = strings.TrimSuffix(host, ":80")
	}
	return host == tu.host || strings.EqualFold(host, tu.host) // the common case at once
}

// rel returns the path of u below the base URL, with a leading slash.
func (tu *txUpstream) rel(u *url.URL) string {
	p := strings.TrimPrefix(u.Path, tu.path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// target rewrites u, which lies under from's base URL, onto to's base URL. It returns u
// itself when to is from.
func target(u *url.URL, from, to *txUpstream) *url.URL {
	if from == to {
		return u
	}
	out := *u
	out.User = nil
	out.Scheme = to.scheme
	out.Host = to.host
	out.Path = to.path + strings.TrimPrefix(u.Path, from.path)
	if u.RawPath != "" {
		out.RawPath = to.raw + strings.TrimPrefix(u.RawPath, from.raw)
	} else {
		out.RawPath = ""
	}
	return &out
}

// callerCredential returns the credential the caller's request carries, for redaction:
// the first of the headers vendors read API keys from, else a "key" query parameter. It is
// read only when something is to be redacted or fingerprinted (txCall.callerKey).
func callerCredential(req *http.Request) string {
	for _, h := range [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		v := strings.TrimSpace(headers.Value(req.Header, h))
		if v == "" {
			continue
		}
		if h == "Authorization" {
			if i := strings.IndexByte(v, ' '); i >= 0 {
				v = strings.TrimSpace(v[i+1:])
			}
		}
		return v
	}
	if req.URL != nil && strings.Contains(req.URL.RawQuery, "key=") {
		return req.URL.Query().Get("key")
	}
	return ""
}
