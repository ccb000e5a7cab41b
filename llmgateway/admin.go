package llmgateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"
)

// AdminHandler returns the admin API, for its own listener:
//
//	GET  /healthz                                  200 while the process serves
//	GET  /readyz                                   200 until shutdown begins, then 503
//	GET  /metrics                                  Prometheus metrics (unless metrics.disabled)
//	GET  /admin/snapshot                           the Client's Snapshot as JSON
//	GET  /admin/budgets                            every budget's state (each tenant's for each_tenant)
//	POST /admin/upstreams/{name}/drain             stop new calls to the upstream
//	POST /admin/upstreams/{name}/undrain           resume them
//	POST /admin/upstreams/{name}/breaker/{action}  open, close (forced) or reset
//	POST /admin/upstreams/{name}/keys/{label}/evict    take a key ("key#2") out
//	POST /admin/upstreams/{name}/keys/{label}/restore  put it back
//	POST /admin/reload                             reload the configuration file
//	GET  /debug/pprof/...                          Go's profiles (net/http/pprof)
//
// Every /admin/ and /debug/pprof/ path needs "Authorization: Bearer <token>", the token named by
// admin.token_env. Answers are JSON; a control answers {"ok":true} or an error.
//
// A client cannot hold a handler: a request's body (no path reads one) must arrive within
// the API's body bound (timeouts.request, else 1 minute) and hold at most adminMaxBody
// bytes (else 408 or 413), and each answer must be taken within timeouts.idle (else 1
// minute), counted for a profile or trace from the end of its ?seconds.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if g.closing.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	if g.metrics != nil {
		mux.Handle("GET /metrics", g.metrics.handler)
	}
	admin := func(pattern string, h func(w http.ResponseWriter, r *http.Request) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !g.adminAuthorized(r) {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "admin token required"})
				return
			}
			v, err := h(w, r)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
				return
			}
			if v == nil {
				v = map[string]any{"ok": true}
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	admin("GET /admin/snapshot", func(w http.ResponseWriter, r *http.Request) (any, error) {
		snap := g.client.Snapshot()
		vendors := g.state.Load().vendors
		for i := range snap.Upstreams {
			// The adapters are wrapped to time them; report the vendor instead.
			snap.Upstreams[i].Adapter = vendors[snap.Upstreams[i].Name]
		}
		return snap, nil
	})
	admin("GET /admin/budgets", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return g.budgets(r.Context())
	})
	admin("POST /admin/upstreams/{name}/drain", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return nil, g.client.Drain(r.PathValue("name"), true)
	})
	admin("POST /admin/upstreams/{name}/undrain", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return nil, g.client.Drain(r.PathValue("name"), false)
	})
	admin("POST /admin/upstreams/{name}/breaker/{action}", func(w http.ResponseWriter, r *http.Request) (any, error) {
		name := r.PathValue("name")
		switch r.PathValue("action") {
		case "open":
			return nil, g.client.ForceBreakerOpen(name)
		case "close":
			return nil, g.client.ForceBreakerClosed(name)
		case "reset":
			return nil, g.client.ResetBreaker(name)
		}
		return nil, errString("breaker action must be open, close or reset")
	})
	admin("POST /admin/upstreams/{name}/keys/{label}/evict", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return nil, g.client.EvictKey(r.PathValue("name"), r.PathValue("label"))
	})
	admin("POST /admin/upstreams/{name}/keys/{label}/restore", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return nil, g.client.RestoreKey(r.PathValue("name"), r.PathValue("label"))
	})
	admin("POST /admin/reload", func(w http.ResponseWriter, r *http.Request) (any, error) {
		src := g.state.Load().cfg.source
		if src == "" {
			return nil, errString("the configuration was not read from a file")
		}
		return nil, g.ReloadFile(src)
	})
	// Profiles of the running gateway, behind the same token: go tool pprof with
	// -http_header or curl -H "Authorization: Bearer $TOKEN" .../debug/pprof/profile?seconds=30.
	mux.HandleFunc("GET /debug/pprof/", g.adminOnly(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/profile", g.adminOnly(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/trace", g.adminOnly(pprof.Trace))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "unknown admin path"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := g.state.Load().cfg
		now := time.Now()
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(now.Add(bodyTimeout(cfg)))
		_ = rc.SetWriteDeadline(now.Add(adminRunTime(r) + writeTimeout(cfg)))
		if !readAdminBody(w, r, cfg) {
			return
		}
		// Read: lift the deadline, which would otherwise end the connection's background
		// read, and with it the request's context (a profile's), while the handler runs.
		_ = rc.SetReadDeadline(time.Time{})
		mux.ServeHTTP(w, r)
	})
}

// adminMaxBody bounds an admin request's body; no admin path reads one.
const adminMaxBody = 64 << 10

// readAdminBody reads and drops r's body, within adminMaxBody and the read deadline,
// before any handler runs: net/http would otherwise read what is left of it, without a
// bound of time, before it answers. It answers 413 or 408 itself and reports false when
// the body is too large or too slow.
func readAdminBody(w http.ResponseWriter, r *http.Request, cfg *Config) bool {
	if r.ContentLength > adminMaxBody {
		w.Header().Set("connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("an admin request body may hold at most %d bytes", adminMaxBody)})
		return false
	}
	if r.ContentLength == 0 {
		return true
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, adminMaxBody))
	var (
		mbe *http.MaxBytesError
		ne  net.Error
	)
	switch {
	case err == nil:
		return true
	case errors.As(err, &mbe):
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("an admin request body may hold at most %d bytes", adminMaxBody)})
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("connection", "close")
		writeJSON(w, http.StatusRequestTimeout, map[string]any{"error": fmt.Sprintf("the request body did not arrive within %v", bodyTimeout(cfg))})
	default:
		w.Header().Set("connection", "close")
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "could not read the request body"})
	}
	return false
}

// adminRunTime is how long a profile or trace of the pprof paths runs before it
// answers: its ?seconds (the write deadline counts from its end). Zero for other paths.
func adminRunTime(r *http.Request) time.Duration {
	if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		return 0
	}
	sec, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
	if err != nil || sec <= 0 || math.IsInf(sec, 0) || math.IsNaN(sec) {
		if r.URL.Path == "/debug/pprof/profile" {
			return 30 * time.Second // pprof.Profile's default
		}
		return time.Second // pprof.Trace's, and the delta profiles'
	}
	return time.Duration(min(sec, float64(24*time.Hour/time.Second)) * float64(time.Second))
}

type errString string

func (e errString) Error() string { return string(e) }

// adminOnly serves h only with the admin token.
func (g *Gateway) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !g.adminAuthorized(r) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "admin token required"})
			return
		}
		h(w, r)
	}
}

func (g *Gateway) adminAuthorized(r *http.Request) bool {
	st := g.state.Load()
	if st.adminToken == ([32]byte{}) {
		return false
	}
	tok, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], st.adminToken[:]) == 1
}

// budgetState is one budget's state for the admin API.
type budgetState struct {
	Name      string    `json:"name"`
	Tenant    string    `json:"tenant,omitempty"`
	CapUSD    float64   `json:"cap_usd"`
	SpentUSD  float64   `json:"spent_usd"`
	HeldUSD   float64   `json:"reserved_usd"`
	Start     time.Time `json:"window_start"`
	End       time.Time `json:"window_end"`
	Error     string    `json:"error,omitempty"`
	Scope     string    `json:"scope"`
	Remaining float64   `json:"remaining_usd"`
}

func (g *Gateway) budgets(ctx context.Context) ([]budgetState, error) {
	cfg := g.state.Load().cfg
	out := []budgetState{}
	for _, b := range cfg.Budgets {
		parts := []string{""}
		if b.Scope == "each_tenant" {
			parts = parts[:0]
			for _, t := range cfg.Tenants {
				parts = append(parts, t.Name)
			}
			if cfg.Open {
				parts = append(parts, OpenTenant)
			}
		}
		for _, p := range parts {
			st, err := g.client.Budget(ctx, b.Name, p)
			bs := budgetState{Name: b.Name, Tenant: p, Scope: b.Scope}
			if bs.Scope == "" {
				bs.Scope = "client"
			}
			if err != nil {
				bs.Error = err.Error()
			} else {
				bs.CapUSD, bs.SpentUSD, bs.HeldUSD = st.Cap.Dollars(), st.Spent.Dollars(), st.Reserved.Dollars()
				bs.Remaining = (st.Cap - st.Spent - st.Reserved).Dollars()
				bs.Start, bs.End = st.Start, st.End
			}
			out = append(out, bs)
		}
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
