package llmclient

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/internal/headers"
)

// txUpstream is an upstream the transport can reach: its Dialect and parsed base URL.
type txUpstream struct {
	up     *upstream
	self   []*upstream // the route of a call that can go nowhere else
	d      Dialect
	ur     UsageReader      // d's usage reader, nil when it has none
	tokens tokenUsageReader // ur without the model's name, nil when it has none
	into   callInspector    // d's Inspect into a pooled call, nil when it has none
	quota  quotaHeaders     // d's quota header names, nil when it does not tell them
	scheme string
	host   string // lower case, default port removed
	path   string // decoded base path, no trailing slash
	raw    string // escaped base path, no trailing slash
	flavor refusalFlavor
	// key is the host as it resolves without DNS (hostKey): what a request's host is
	// compared with when it is not written the same way.
	key string
	// shapes remembers what the Dialect answered for a method and path without a body
	// (shapeOf): copied on write, at most maxShapes entries.
	shapes atomic.Pointer[map[shapeKey]shapeAnswer]
}

// maxShapes bounds the paths a txUpstream remembers the shape of.
const maxShapes = 64

type shapeKey struct{ method, rel string }

type shapeAnswer struct {
	shape dialect.Shape
	ok    bool
}

// shapeOf returns the shape the Dialect gives a request by method and path alone, as
// Inspect without a body does: remembered, since a failover upstream is asked on every
// call that could reach it. Safe for concurrent use.
func (tu *txUpstream) shapeOf(method, rel string) (dialect.Shape, bool) {
	k := shapeKey{method, rel}
	m := tu.shapes.Load()
	if m != nil {
		if a, hit := (*m)[k]; hit {
			return a.shape, a.ok
		}
	}
	c, ok := tu.d.Inspect(method, rel, nil)
	a := shapeAnswer{c.Shape, ok}
	if m == nil || len(*m) < maxShapes {
		next := make(map[shapeKey]shapeAnswer, 1+lenOf(m))
		if m != nil {
			for k, v := range *m {
				next[k] = v
			}
		}
		next[shapeKey{strings.Clone(method), strings.Clone(rel)}] = a
		tu.shapes.CompareAndSwap(m, &next) // a lost race leaves the other's copy
	}
	return a.shape, a.ok
}

func lenOf(m *map[shapeKey]shapeAnswer) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

func newTxUpstream(up *upstream, d Dialect) (*txUpstream, bool) {
	u, err := url.Parse(d.BaseURL())
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, false
	}
	scheme := strings.ToLower(u.Scheme)
	ur, _ := up.Provider.(UsageReader)
	tokens, _ := up.Provider.(tokenUsageReader)
	into, _ := d.(callInspector)
	quota, _ := d.(quotaHeaders)
	return &txUpstream{
		quota:  quota,
		ur:     ur,
		tokens: tokens,
		into:   into,
		up:     up,
		self:   []*upstream{up},
		d:      d,
		scheme: scheme,
		host:   canonicalHost(scheme, u.Host),
		path:   strings.TrimRight(u.Path, "/"),
		raw:    strings.TrimRight(u.EscapedPath(), "/"),
		flavor: flavorOf(d),
		key:    hostKey(scheme, u.Host),
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

// match returns the upstream whose base URL holds u, the longest base path first, and
// u's path below it. Scheme and host compare without regard to case, a default port left
// out or not. When no base URL holds u as it is written, match compares hosts by what
// they resolve to without DNS (hostKey: loopback names and addresses are one host, IP
// literals in canonical form) and tolerates a base path's "/v1" missing from u, or one
// more "/v1" in it, when the upstream's Dialect recognizes the rest as an API call.
func (t *Transport) match(u *url.URL, method string) (*txUpstream, string) {
	if u == nil || len(t.ups) == 0 {
		return nil, ""
	}
	for _, tu := range t.ups {
		if tu.scheme != u.Scheme && !strings.EqualFold(tu.scheme, u.Scheme) || !tu.sameHost(u.Host) {
			continue
		}
		if tu.path == "" || u.Path == tu.path || (strings.HasPrefix(u.Path, tu.path) && u.Path[len(tu.path)] == '/') {
			return tu, tu.rel(u)
		}
	}
	return t.looseMatch(u, method)
}

// looseMatch is match for a URL no base URL holds as it is written.
func (t *Transport) looseMatch(u *url.URL, method string) (*txUpstream, string) {
	key := hostKey(strings.ToLower(u.Scheme), u.Host)
	for pass := range 2 {
		for _, tu := range t.ups {
			if !strings.EqualFold(tu.scheme, u.Scheme) || tu.key != key {
				continue
			}
			if pass == 0 {
				if tu.path == "" || u.Path == tu.path || (strings.HasPrefix(u.Path, tu.path) && u.Path[len(tu.path)] == '/') {
					return tu, tu.rel(u)
				}
				continue
			}
			if rel, ok := tu.versionRel(u.Path); ok {
				if _, known := tu.d.Inspect(method, rel, nil); known {
					return tu, rel
				}
			}
		}
	}
	return nil, ""
}

// versionRel returns path below tu's base path when they differ only by a "/v1" segment:
// the base path ends with "/v1" and path lacks it, or path has "/v1" after the whole base
// path.
func (tu *txUpstream) versionRel(path string) (string, bool) {
	const v1 = "/v1"
	if strings.HasSuffix(tu.path, v1) {
		parent := tu.path[:len(tu.path)-len(v1)]
		if strings.HasPrefix(path, parent+"/") && !strings.HasPrefix(path, tu.path+"/") {
			if rel := path[len(parent):]; !versionSegment(rel) {
				return rel, true
			}
		}
	}
	if rest, ok := strings.CutPrefix(path, tu.path+v1+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// versionSegment reports whether rel's first segment names an API version ("v2",
// "v1beta", "v1x"): another API than the base path's, not a missing "/v1".
func versionSegment(rel string) bool {
	return len(rel) >= 3 && rel[1] == 'v' && rel[2] >= '0' && rel[2] <= '9'
}

// hostKey is a URL host as it resolves without DNS: lower case, the scheme's default port
// and a trailing dot removed, "localhost" (and names under it) and every loopback address
// one host, IP literals in their canonical form.
func hostKey(scheme, host string) string {
	host = canonicalHost(scheme, host)
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		name = "loopback"
	} else if ip, err := netip.ParseAddr(name); err == nil {
		if ip = ip.Unmap(); ip.IsLoopback() {
			name = "loopback"
		} else {
			name = ip.WithZone("").String()
		}
	}
	return name + ":" + port
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

// target rewrites u, which lies under from's base URL with rel below it, onto to's base
// URL. It returns u itself when to is from.
func target(u *url.URL, rel string, from, to *txUpstream) *url.URL {
	if from == to {
		return u
	}
	out := *u
	out.User = nil
	out.Scheme = to.scheme
	out.Host = to.host
	out.Path = to.path + rel
	out.RawPath = ""
	if u.RawPath != "" && strings.HasPrefix(u.Path, from.path) && u.Path[len(from.path):] == rel {
		out.RawPath = to.raw + strings.TrimPrefix(u.RawPath, from.raw)
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
