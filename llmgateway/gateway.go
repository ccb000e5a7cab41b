package llmgateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
)

// Gateway is an OpenAI- and Anthropic-compatible HTTP server in front of one
// llmclient.Client: every request it accepts is a call of that Client, under its
// limiter, retry, breaker, failover, stream guard, budgets and cache. Create one with
// New, serve Handler (and AdminHandler) or call Serve, and Shutdown it. A Gateway is
// safe for concurrent use.
type Gateway struct {
	client  *llmclient.Client
	log     *slog.Logger
	level   *slog.LevelVar
	hc      *http.Client
	state   atomic.Pointer[state]
	metrics *metrics
	closers []func() error
	// logFlush writes out the default logger's buffered lines; it runs after closers.
	logFlush func() error

	// handlers counts the requests being served; a Shutdown that cuts some waits
	// for theirs to end (handlersIdle), so that their access log lines are written.
	handlers     atomic.Int64
	handlersMu   sync.Mutex
	handlersIdle chan struct{}

	reloadMu sync.Mutex
	// seen is the configuration file as last read by New's configuration, a reload
	// or WatchFile, applied or refused: the watcher skips what was already tried.
	seenMu   sync.Mutex
	seenFile string
	seenData []byte

	closing atomic.Bool
	// Set with closing, under srvMu, by the first Shutdown: cut ends its drain early;
	// shut is closed when that shutdown has ended, its result then in shutErr.
	cut     context.CancelFunc
	shut    chan struct{}
	shutErr error

	idPrefix string
	idSeq    atomic.Uint64

	srvMu   sync.Mutex
	servers []*http.Server
}

// state is what a configuration decides that a reload may swap at once.
type state struct {
	cfg        *Config
	tenants    map[[32]byte]*tenant
	adminToken [32]byte
	vendors    map[string]string // upstream name → vendor
}

// OpenTenant is the tenant of the callers without a key of a gateway with open: true:
// one partition, so that tenant_limits and each_tenant budgets apply to them together.
// No configured tenant may take the name.
const OpenTenant = "-"

// openCaller is the tenant of every caller without a key under open: true.
var openCaller = &tenant{name: OpenTenant, all: true}

type tenant struct {
	name   string
	models []string
	all    bool
}

func (t *tenant) allows(model string) bool {
	if t.all {
		return true
	}
	for _, p := range t.models {
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}

func newState(cfg *Config) *state {
	st := &state{cfg: cfg, tenants: map[[32]byte]*tenant{}, vendors: map[string]string{}}
	for _, t := range cfg.Tenants {
		tn := &tenant{name: t.Name, models: t.Models}
		for _, m := range t.Models {
			if m == "*" {
				tn.all = true
			}
		}
		for _, k := range t.keys {
			st.tenants[sha256.Sum256([]byte(k))] = tn
		}
	}
	if cfg.Admin.token != "" {
		st.adminToken = sha256.Sum256([]byte(cfg.Admin.token))
	}
	for _, u := range cfg.Upstreams {
		st.vendors[u.Name] = u.Vendor
	}
	return st
}

// Option configures New.
type Option func(*options)

type options struct {
	logger *slog.Logger
	hc     *http.Client
	extra  []llmclient.Option
}

// WithLogger sets the logger of the access log and the gateway's events. Default: a
// JSON or text handler on stderr, as the configuration's log section says, whose lines
// are written in batches (at most 100 ms after they are logged, and at Shutdown); the
// level follows the configuration on reload only for the default logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithUpstreamHTTPClient sets the HTTP client the upstreams' adapters send through.
// Default: one with a pooled transport sized for a gateway.
func WithUpstreamHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithClientOptions adds options to the Client after the configuration's (the
// last one wins): for what the file cannot say, such as a FallbackFunc.
func WithClientOptions(opts ...llmclient.Option) Option {
	return func(o *options) { o.extra = append(o.extra, opts...) }
}

// New builds the Gateway of cfg (from LoadFile or Parse): its upstreams, the Client,
// stores, cache and metrics. It connects to nothing until a request needs it.
func New(cfg *Config, opts ...Option) (*Gateway, error) {
	if cfg == nil || cfg.env == nil {
		return nil, errors.New("llmgateway: the configuration must come from LoadFile or Parse")
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	g := &Gateway{level: new(slog.LevelVar)}
	g.level.Set(parseLevel(cfg.Log.Level))
	g.log = o.logger
	if g.log == nil {
		hopts := &slog.HandlerOptions{Level: g.level}
		// Lines reach stderr in batches (at most 100 ms late), not one write each.
		lb := newLogBuffer(os.Stderr)
		g.logFlush = lb.close
		if cfg.Log.Format == "text" {
			g.log = slog.New(slog.NewTextHandler(lb, hopts))
		} else {
			g.log = slog.New(slog.NewJSONHandler(lb, hopts))
		}
	}
	base := o.hc
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
		base = &http.Client{Transport: tr}
		g.closers = append(g.closers, func() error { tr.CloseIdleConnections(); return nil })
	}
	// The upstream exchanges are timed on the wire, for the overhead.
	hc := *base
	if hc.Transport == nil {
		hc.Transport = http.DefaultTransport
	}
	hc.Transport = &timingTransport{base: hc.Transport}
	g.hc = &hc
	var b [6]byte
	_, _ = rand.Read(b[:])
	g.idPrefix = hex.EncodeToString(b[:]) + "-"

	copts, err := cfg.clientOptions(g.hc, timeProvider, true)
	if err != nil {
		return nil, fmt.Errorf("llmgateway: %w", err)
	}
	st := newState(cfg)
	var tel func(context.Context, llmclient.Event)
	if !cfg.Metrics.Disabled {
		m, mopts, err := newMetrics(st.vendors)
		if err != nil {
			return nil, fmt.Errorf("llmgateway: metrics: %w", err)
		}
		g.metrics = m
		copts = append(copts, mopts...)
		tel = m.tel.Observe
		g.closers = append(g.closers, m.close)
	}
	sopts, closers, err := cfg.storeOptions()
	if err != nil {
		g.close()
		return nil, fmt.Errorf("llmgateway: %w", err)
	}
	copts = append(copts, sopts...)
	// The stores close after the Client's last call: closers run in reverse.
	g.closers = append(closers, g.closers...)
	copts = append(copts, llmclient.WithObserver(func(ctx context.Context, e llmclient.Event) {
		if tel != nil {
			tel(ctx, e)
		}
		switch e.Kind {
		case event.Attempt:
			clockOf(ctx).attempt(e.Waited)
		case event.Call:
			clockOf(ctx).call(e)
		}
		g.observe(e)
	}))
	copts = append(copts, o.extra...)
	client, err := llmclient.New(copts...)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("llmgateway: %w", err)
	}
	g.client = client
	if g.metrics != nil {
		if err := g.metrics.watch(client); err != nil {
			g.close()
			return nil, fmt.Errorf("llmgateway: metrics: %w", err)
		}
	}
	g.state.Store(st)
	g.see(cfg)
	warmFrontDoors()
	return g, nil
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(s))
	return l
}

// Client returns the Gateway's Client, for embedding programs.
func (g *Gateway) Client() *llmclient.Client { return g.client }

// observe logs the Client's events an operator must see; keys are labels, never keys.
func (g *Gateway) observe(e llmclient.Event) {
	switch e.Kind {
	case event.Breaker:
		g.log.Warn("breaker", "upstream", e.Upstream, "from", e.From.String(), "to", e.To.String())
	case event.KeyEvicted:
		g.log.Warn("key evicted", "upstream", e.Upstream, "key", e.Key, "until", e.Until, "class", e.Class.String())
	case event.Alert:
		msg := ""
		if e.Err != nil {
			msg = e.Err.Error()
		}
		g.log.Error("alert", "upstream", e.Upstream, "key", e.Key, "class", e.Class.String(), "err", msg)
	case event.Budget:
		if e.Budget != nil {
			g.log.Warn("budget", "budget", e.Budget.Name, "tenant", e.Budget.Partition, "fraction", e.Budget.Fraction,
				"spent_usd", e.Budget.Spent.Dollars(), "cap_usd", e.Budget.Cap.Dollars(), "hard", e.Budget.Hard)
		}
	case event.Control:
		g.log.Info("control", "upstream", e.Upstream, "key", e.Key, "action", e.Action)
	}
}

func (g *Gateway) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		_ = g.closers[i]()
	}
	g.closers = nil
	if g.logFlush != nil {
		_ = g.logFlush()
	}
}

// requestID returns the caller's id from the configured header, or a new one.
func (g *Gateway) requestID(r *http.Request, header string) string {
	if id := r.Header.Get(header); id != "" && len(id) <= 128 {
		return id
	}
	return g.idPrefix + strconv.FormatUint(g.idSeq.Add(1), 36)
}

// priorityHeader is the request header that makes a call ratelimit.Batch: limited to
// limiter.batch_share of each limit, with limiter.wait_threshold.batch. It can only lower
// a request's priority: interactive is the default.
const priorityHeader = "x-llmclient-priority"

// priorityKey is priorityHeader as net/http stores it, read without canonicalizing.
var priorityKey = http.CanonicalHeaderKey(priorityHeader)

// requestPriority is the priority a request's header asks for: interactive when it is
// absent or empty, else its one value, interactive or batch in any case; ok is false for
// any other value, or several.
func requestPriority(h http.Header) (p ratelimit.Priority, ok bool) {
	v := h[priorityKey]
	switch {
	case len(v) == 0 || len(v) == 1 && (v[0] == "" || strings.EqualFold(v[0], "interactive")):
		return ratelimit.Interactive, true
	case len(v) == 1 && strings.EqualFold(v[0], "batch"):
		return ratelimit.Batch, true
	}
	return ratelimit.Interactive, false
}

// callerKey is the gateway key of a request: a bearer token (the scheme's name in any
// case, as HTTP reads it), or else x-api-key, or else api-key. An Authorization header of
// another scheme carries no gateway key and does not hide the others.
func callerKey(r *http.Request) string {
	if k, ok := bearer(r.Header.Get("Authorization")); ok {
		return k
	}
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return r.Header.Get("api-key")
}

// bearer returns the token of an Authorization header of the Bearer scheme, whose name
// is case-insensitive (RFC 9110, 11.1).
func bearer(a string) (string, bool) {
	const scheme = "bearer "
	if len(a) < len(scheme) || !strings.EqualFold(a[:len(scheme)], scheme) {
		return "", false
	}
	k := strings.TrimSpace(a[len(scheme):])
	return k, k != ""
}

// Handler returns the API handler: POST /v1/chat/completions, /v1/embeddings and
// /v1/messages (also without the /v1 prefix).
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+p+"/chat/completions", func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, routeChat) })
		mux.HandleFunc("POST "+p+"/embeddings", func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, routeEmbed) })
		mux.HandleFunc("POST "+p+"/messages", func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, routeMessages) })
	}
	mux.HandleFunc("GET /v1/models", g.serveModels)
	mux.HandleFunc("GET /models", g.serveModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d := dialectOpenAI
		if r.Header.Get("anthropic-version") != "" {
			d = dialectAnthropic
		}
		st := g.state.Load()
		e := localError(http.StatusNotFound, fmt.Sprintf("unknown path %s %s", r.Method, r.URL.Path))
		if strings.HasSuffix(r.URL.Path, "/chat/completions") || strings.HasSuffix(r.URL.Path, "/embeddings") || strings.HasSuffix(r.URL.Path, "/messages") {
			e = localError(http.StatusMethodNotAllowed, "use POST")
		}
		e.write(w, d, g.requestID(r, st.cfg.Headers.RequestID))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := g.state.Load().cfg
		now := time.Now()
		rc := http.NewResponseController(w)
		// The body must arrive in time, also when the handler refuses the request
		// unread: net/http then reads what is left of it to reuse the connection.
		_ = rc.SetReadDeadline(now.Add(bodyTimeout(cfg)))
		// A fresh write deadline for every request: net/http keeps the one the
		// connection's previous request set (it resets it only with a WriteTimeout).
		_ = rc.SetWriteDeadline(now.Add(writeTimeout(cfg)))
		mux.ServeHTTP(w, r)
	})
}

// Bounds on a caller, so that one that stalls or stops reading does not hold its
// handler (and, through it, a shutdown) until its connection dies.
const (
	// defaultBodyTimeout bounds reading a request body when timeouts.request is not
	// set; with it, the body must arrive by the request's deadline.
	defaultBodyTimeout = time.Minute
	// defaultWriteTimeout bounds each write to a caller when timeouts.idle is not set:
	// the library's idle timeout before it learns one.
	defaultWriteTimeout = time.Minute
	// writePiece is the most of a one-shot answer one write deadline covers.
	writePiece = 64 << 10
)

// bodyTimeout is how long a request's body may take to arrive: timeouts.request,
// which counts from the request's arrival.
func bodyTimeout(cfg *Config) time.Duration {
	if d := cfg.Timeouts.Request.D(); d > 0 {
		return d
	}
	return defaultBodyTimeout
}

// writeTimeout is how long a write to a caller may wait for the caller to take it:
// timeouts.idle, which also ends a stream whose caller leaves it unread that long.
func writeTimeout(cfg *Config) time.Duration {
	if d := cfg.Timeouts.Idle.D(); d > 0 {
		return d
	}
	return defaultWriteTimeout
}

// writeDeadline is the deadline of a write to a caller that begins now: d from now, or
// by at the latest when by is not zero.
func writeDeadline(d time.Duration, by time.Time) time.Time {
	dl := time.Now().Add(d)
	if !by.IsZero() && by.Before(dl) {
		return by
	}
	return dl
}

// serveModels lists, in OpenAI's shape, the model and group names the caller's key
// may call: the groups and the names the upstreams map (an upstream without a map
// serves any name and adds none).
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	st := g.state.Load()
	var tn *tenant
	if key := callerKey(r); key != "" {
		tn = st.tenants[sha256.Sum256([]byte(key))]
	}
	if tn == nil {
		if !st.cfg.Open {
			localError(http.StatusUnauthorized, "invalid gateway API key").write(w, dialectOpenAI, g.requestID(r, st.cfg.Headers.RequestID))
			return
		}
		tn = openCaller
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	seen := map[string]bool{}
	add := func(name, owner string) {
		if !seen[name] && tn.allows(name) {
			seen[name] = true
			out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: owner})
		}
	}
	for _, gr := range st.cfg.Groups {
		add(gr.Name, "llmgateway")
	}
	for _, u := range st.cfg.Upstreams {
		for _, name := range sortedKeys(u.Models) {
			add(name, u.Vendor)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

type route uint8

const (
	routeChat route = iota
	routeEmbed
	routeMessages
)

func (r route) String() string {
	return [...]string{"openai.chat", "openai.embeddings", "anthropic.messages"}[r]
}

// record is one request's access log line.
type record struct {
	start     time.Time
	id        string
	route     route
	tenant    string
	model     string
	stream    bool
	status    int
	upstream  string
	attempts  int
	fallback  bool
	class     failure.Class
	waited    time.Duration
	upstreamT time.Duration
	input     int
	output    int
	cost      float64
	costKnown bool
	cached    bool
	// overhead is the time spent in the gateway and the engine: the request's time
	// less the upstream calls and the deliberate waits (backoff, Retry-After, limits).
	overhead time.Duration
	// logged: the access log was on (level info) when the request arrived; a reload
	// while it runs does not change that.
	logged bool
	// accounted: the request's line and metrics were written (logAccess runs once).
	accounted bool
	// notes are the serving upstream adapter's notes on its translation of the call.
	notes []string
}

// logAccess writes the request's access log line and metrics, once.
func (g *Gateway) logAccess(rec *record) {
	if rec.accounted {
		return
	}
	rec.accounted = true
	d := time.Since(rec.start)
	if g.metrics != nil {
		g.metrics.request(rec, d)
	}
	if !rec.logged {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", rec.id), slog.String("route", rec.route.String()),
		slog.String("tenant", rec.tenant), slog.String("model", rec.model), slog.Bool("stream", rec.stream),
		slog.Int("status", rec.status), slog.String("upstream", rec.upstream), slog.Int("attempts", rec.attempts),
		slog.Float64("duration_ms", ms(d)), slog.Float64("overhead_ms", ms(rec.overhead)),
	}
	if rec.class != failure.None {
		attrs = append(attrs, slog.String("class", rec.class.String()))
	}
	if rec.fallback {
		attrs = append(attrs, slog.Bool("fallback", true))
	}
	if rec.cached {
		attrs = append(attrs, slog.Bool("cached", true))
	}
	if rec.waited > 0 {
		attrs = append(attrs, slog.Float64("waited_ms", ms(rec.waited)))
	}
	if rec.input > 0 || rec.output > 0 {
		attrs = append(attrs, slog.Int("input_tokens", rec.input), slog.Int("output_tokens", rec.output))
	}
	if rec.costKnown {
		attrs = append(attrs, slog.Float64("cost_usd", rec.cost))
	}
	g.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fromResponse fills the record's call fields.
func (rec *record) fromResponse(resp *llmclient.Response) {
	if resp == nil {
		return
	}
	switch {
	case resp.Cached: // no upstream was tried
	case resp.Upstream != "":
		rec.upstream, rec.attempts = resp.Upstream, max(len(resp.Attempts), 1)
	default: // the fallback function's, after the attempts that failed
		rec.tried(resp.Attempts)
	}
	rec.fallback, rec.cached = resp.Fallback, resp.Cached
	rec.notes = servedNotes(resp.Attempts)
	rec.input, rec.output = resp.Usage.InputTokens, resp.Usage.OutputTokens
	rec.cost, rec.costKnown = resp.Cost.Amount.Dollars(), resp.Cost.Known
	rec.waited = waited(resp.Attempts)
}

func (rec *record) fromError(err error) {
	var le *llmclient.Error
	rec.class = llmclient.ClassOf(err)
	if errors.As(err, &le) {
		rec.tried(le.Attempts)
		rec.notes = servedNotes(le.Attempts)
		rec.waited = waited(le.Attempts)
		rec.cost, rec.costKnown = le.Cost.Amount.Dollars(), le.Cost.Known
		// The tokens the cost was priced on: the attempts' usage, reported or, where
		// the upstream reported none (a stream cut or left early), the Client's estimate.
		u := attemptsUsage(le.Attempts)
		rec.input, rec.output = u.InputTokens, u.OutputTokens
	}
}

// attemptsUsage sums the attempts' usage.
func attemptsUsage(as []llmclient.Attempt) llmclient.Usage {
	var u llmclient.Usage
	for _, a := range as {
		u.InputTokens += a.Usage.InputTokens
		u.OutputTokens += a.Usage.OutputTokens
		u.TotalTokens += a.Usage.TotalTokens
		u.CachedInputTokens += a.Usage.CachedInputTokens
		u.CacheWriteTokens += a.Usage.CacheWriteTokens
		u.CacheWrite1hTokens += a.Usage.CacheWrite1hTokens
		u.ReasoningTokens += a.Usage.ReasoningTokens
		u.Estimated = u.Estimated || a.Usage.Estimated
	}
	return u
}

// tried sets the upstream and attempts of the call from its attempts when they name
// an upstream: a stream's record already names the one that served it, which the
// Response of a stream cut short does not.
func (rec *record) tried(as []llmclient.Attempt) {
	if u, n := tried(as); u != "" {
		rec.upstream, rec.attempts = u, n
	}
}

// tried returns the upstream of the last attempt that called one, and how many attempts
// the call made, once one called an upstream: a call that none did (refused by the
// gateway or the Client, answered from the cache) names neither.
func tried(as []llmclient.Attempt) (upstream string, attempts int) {
	for i := len(as) - 1; i >= 0; i-- {
		if !as[i].Local {
			return as[i].Upstream, len(as)
		}
	}
	return "", 0
}

// servedNotes are the notes of the last attempt that called an upstream: the one whose
// answer (or failure) the caller gets.
func servedNotes(as []llmclient.Attempt) []string {
	for i := len(as) - 1; i >= 0; i-- {
		if !as[i].Local {
			return as[i].Notes
		}
	}
	return nil
}

func waited(as []llmclient.Attempt) time.Duration {
	var w time.Duration
	for _, a := range as {
		w += a.Waited
	}
	return w
}

// overheadNow is the request's overhead so far: its time less the upstream calls and
// the waits before them (the attempts' own record when the call has ended, else what
// the attempts that ended so far reported).
func (rec *record) overheadNow(clock *upstreamClock) time.Duration {
	return max(time.Since(rec.start)-clock.total()-max(rec.waited, clock.waited()), 0)
}

func overheadHeader(d time.Duration) string {
	return strconv.FormatFloat(ms(d), 'f', 3, 64)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, rt route) {
	g.handlers.Add(1)
	defer g.handlerDone()
	rec := &record{start: time.Now(), route: rt, logged: g.log.Enabled(context.Background(), slog.LevelInfo)}
	st := g.state.Load()
	cfg := st.cfg
	d := dialectOpenAI
	if rt == routeMessages {
		d = dialectAnthropic
	}
	rec.id = g.requestID(r, cfg.Headers.RequestID)
	w.Header().Set(cfg.Headers.RequestID, rec.id)
	defer g.logAccess(rec)
	rc := http.NewResponseController(w)
	wt := writeTimeout(cfg)
	fail := func(e *apiError) {
		rec.status = e.status
		if rec.class == failure.None {
			rec.class = e.class
		}
		g.callHeaders(w.Header(), rec)
		_ = rc.SetWriteDeadline(time.Now().Add(wt))
		e.write(w, d, rec.id)
	}
	if g.closing.Load() {
		fail(localError(http.StatusServiceUnavailable, "the gateway is shutting down"))
		return
	}
	var tn *tenant
	if key := callerKey(r); key != "" {
		tn = st.tenants[sha256.Sum256([]byte(key))]
	}
	if tn == nil {
		if !cfg.Open {
			fail(localError(http.StatusUnauthorized, "invalid gateway API key"))
			return
		}
		tn = openCaller
	}
	rec.tenant = tn.name
	prio, ok := requestPriority(r.Header)
	if !ok {
		fail(localError(http.StatusBadRequest, "the "+priorityHeader+" header must be interactive or batch, once"))
		return
	}
	// Handler, the only way here, set the body's read deadline (bodyTimeout).
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxRequestBytes))
	if err != nil {
		var (
			mbe *http.MaxBytesError
			ne  net.Error
		)
		switch {
		case errors.As(err, &mbe):
			fail(localError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds %d bytes", cfg.MaxRequestBytes)))
		case errors.As(err, &ne) && ne.Timeout():
			fail(localError(http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", bodyTimeout(cfg))))
		default:
			fail(localError(http.StatusBadRequest, "could not read the request body"))
		}
		return
	}
	// Read: lift the deadline, which would otherwise end the connection's background
	// read, and with it the request's context, while the call runs.
	_ = rc.SetReadDeadline(time.Time{})
	var (
		req          *llmclient.Request
		ereq         *llmclient.EmbedRequest
		stream, incl bool
		b64          bool
	)
	switch rt {
	case routeChat:
		req, stream, incl, err = decodeOpenAIChat(body)
	case routeMessages:
		req, stream, err = decodeAnthropic(body)
	case routeEmbed:
		ereq, b64, err = decodeOpenAIEmbed(body)
	}
	if err != nil {
		fail(decodeError(err))
		return
	}
	model := ""
	if req != nil {
		model, req.Priority = req.Model, prio
	} else {
		model, ereq.Priority = ereq.Model, prio
	}
	rec.model, rec.stream = model, stream
	if !tn.allows(model) {
		fail(localError(http.StatusForbidden, fmt.Sprintf("model %q is not allowed for this key", model)))
		return
	}
	clock := &upstreamClock{}
	ctx := withClock(llmclient.WithPartition(r.Context(), tn.name), clock)
	if t := cfg.Timeouts.Request.D(); t > 0 {
		// From the request's arrival: the time its body took counts.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, rec.start.Add(t))
		defer cancel()
	}
	created := time.Now().Unix()
	switch {
	case ereq != nil:
		resp, err := g.client.Embed(ctx, ereq)
		if err != nil {
			rec.fromError(err)
			rec.overhead = rec.overheadNow(clock)
			fail(fromError(err))
			return
		}
		rec.upstream, rec.attempts, rec.fallback = resp.Upstream, len(resp.Attempts), resp.Fallback
		rec.input, rec.waited = resp.Usage.InputTokens, waited(resp.Attempts)
		rec.cost, rec.costKnown = resp.Cost.Amount.Dollars(), resp.Cost.Known
		out := encodeOpenAIEmbed(resp, model, b64)
		rec.overhead = rec.overheadNow(clock)
		g.writeOK(w, rc, wt, rec, out)
	case !stream:
		resp, err := g.client.Complete(ctx, req)
		if err != nil {
			if p := partialAnswer(err); p != nil {
				rec.fromError(err)
				resp = p
			} else {
				rec.fromError(err)
				rec.overhead = rec.overheadNow(clock)
				fail(fromError(err))
				return
			}
		} else {
			rec.fromResponse(resp)
		}
		m := model
		if resp.Model != "" {
			m = resp.Model
		}
		var out []byte
		if rt == routeMessages {
			out = encodeAnthropic(resp, msgID(resp.ID, rec.id), m, req.Stop)
		} else {
			out = encodeOpenAIChat(resp, chatID(resp.ID, rec.id), m, created)
		}
		rec.overhead = rec.overheadNow(clock)
		g.writeOK(w, rc, wt, rec, out)
	default:
		g.serveStream(ctx, w, rec, req, d, incl, created, clock, fail)
	}
}

// partialAnswer is the answer a vendor gives as a 200 that the Client reports as an
// error: a content filter or a refusal, and reasoning with no content.
func partialAnswer(err error) *llmclient.Response {
	var le *llmclient.Error
	if !errors.As(err, &le) || le.Partial == nil {
		return nil
	}
	if le.Class == failure.ContentFiltered || le.Class == failure.EmptyOutput {
		p := *le.Partial
		if p.Upstream == "" {
			p.Upstream = le.Upstream
		}
		p.Attempts = le.Attempts
		return &p
	}
	return nil
}

// chatID is the id of a chat completion: the upstream's when it is one of OpenAI's
// (chatcmpl-…), else one made of the request id, as msgID does for Anthropic's. An
// Anthropic msg_… or a Gemini responseId is not passed on as a chat completion's.
func chatID(id, rid string) string {
	if strings.HasPrefix(id, "chatcmpl-") {
		return id
	}
	return "chatcmpl-" + rid
}

func msgID(id, rid string) string {
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	return "msg_" + rid
}

// writeOK writes a one-shot answer with its length (a large one is then not sent
// chunked). The handler sends it when it returns, after the access log line and the
// metrics: a client that has the answer finds the request logged and counted. The
// caller must take each writePiece of it within wt.
func (g *Gateway) writeOK(w http.ResponseWriter, rc *http.ResponseController, wt time.Duration, rec *record, body []byte) {
	h := w.Header()
	h.Set("content-type", "application/json")
	h.Set("content-length", strconv.Itoa(len(body)))
	g.callHeaders(h, rec)
	rec.status = http.StatusOK
	// The line and metrics first: a body larger than net/http's buffer goes to the
	// client as it is written, and a client that has its answer finds it counted.
	g.logAccess(rec)
	w.WriteHeader(http.StatusOK)
	total := len(body)
	for len(body) > 0 {
		n := min(len(body), writePiece)
		_ = rc.SetWriteDeadline(time.Now().Add(wt))
		if _, err := w.Write(body[:n]); err != nil {
			g.undelivered(rec, total-len(body), total)
			return
		}
		body = body[n:]
	}
}

// undelivered records a one-shot answer whose writing failed (the caller went away or
// stopped reading) after its access log line was written: a line of its own, and the
// llmgateway.answers.undelivered count. An answer within net/http's buffer is sent
// after the handler returns, and its failure is not seen.
func (g *Gateway) undelivered(rec *record, written, total int) {
	if g.metrics != nil {
		g.metrics.undelivered(rec.route)
	}
	if rec.logged {
		g.log.LogAttrs(context.Background(), slog.LevelInfo, "answer not delivered",
			slog.String("request_id", rec.id), slog.String("route", rec.route.String()),
			slog.Int("written_bytes", written), slog.Int("answer_bytes", total))
	}
}

func (g *Gateway) callHeaders(h http.Header, rec *record) {
	h.Set("x-llmclient-overhead-ms", overheadHeader(rec.overhead))
	if rec.upstream != "" {
		h.Set("x-llmclient-upstream", rec.upstream)
	}
	if rec.attempts > 0 {
		h.Set("x-llmclient-attempts", strconv.Itoa(rec.attempts))
	}
	for i, n := range rec.notes {
		if i == maxNotes {
			h.Add(notesHeader, "...")
			break
		}
		h.Add(notesHeader, noteValue(n))
	}
}

// notesHeader carries the serving adapter's notes on how it translated the request (a
// field the vendor has no equivalent for, a clamped parameter, a remapped id), one
// value each, at most maxNotes of them.
const (
	notesHeader = "x-llmclient-notes"
	maxNotes    = 8
	maxNoteLen  = 256
)

// noteValue is a note as a header value: the values it quotes (the caller's ids, as
// written) elided, printable ASCII only, at most maxNoteLen bytes.
func noteValue(n string) string {
	b := make([]byte, 0, min(len(n), maxNoteLen))
	for i := 0; i < len(n) && len(b) < maxNoteLen; i++ {
		c := n[i]
		switch {
		case c == '"':
			// A Go-quoted value (%q): skip to its closing quote.
			for i++; i < len(n) && n[i] != '"'; i++ {
				if n[i] == '\\' {
					i++
				}
			}
			b = append(b, `"..."`...)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	if len(b) > maxNoteLen {
		b = b[:maxNoteLen]
	}
	return string(b)
}

func (g *Gateway) serveStream(ctx context.Context, w http.ResponseWriter, rec *record, req *llmclient.Request,
	d dialect, includeUsage bool, created int64, clock *upstreamClock, fail func(*apiError)) {
	s, err := g.client.Stream(ctx, req)
	if err != nil {
		rec.fromError(err)
		rec.overhead = rec.overheadNow(clock)
		fail(fromError(err))
		return
	}
	defer s.Close()
	// The stream is committed: its first chunk is there. Read it before the status
	// line, so that a stream that ends at once still gets a proper error status.
	if !s.Next() {
		err := s.Err()
		if err == nil {
			err = &llmclient.Error{Class: failure.StreamInterrupted, Message: "the stream ended without content"}
		}
		rec.fromError(err)
		rec.overhead = rec.overheadNow(clock)
		fail(fromError(err))
		return
	}
	first := s.Current()
	model := req.Model
	if first.Model != "" {
		model = first.Model
	}
	// The committed attempt has not ended: its upstream is the one whose stream gave
	// the first chunk, and the attempts before it have reported.
	if p := clock.served.Load(); p != nil {
		rec.upstream, rec.notes = p.name, p.notes
		rec.attempts = int(clock.attempts.Load()) + 1
	} // else no upstream served it: the cache did
	h := w.Header()
	h.Set("content-type", "text/event-stream")
	h.Set("cache-control", "no-cache")
	h.Set("x-accel-buffering", "no")
	rec.overhead = rec.overheadNow(clock)
	g.callHeaders(h, rec)
	rec.status = http.StatusOK
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Each write must be taken within the write timeout, and an event by the request's
	// deadline: a caller that stops reading is cut, one that reads slowly is not.
	wt := writeTimeout(g.state.Load().cfg)
	by, _ := ctx.Deadline()
	var (
		oa      *oaStreamWriter
		an      *anStreamWriter
		written error
	)
	if d == dialectAnthropic {
		an = &anStreamWriter{id: msgID(first.ID, rec.id), model: model, stops: req.Stop}
	} else {
		oa = &oaStreamWriter{id: chatID(first.ID, rec.id), model: model, created: created}
	}
	emit := func(c llmclient.Chunk) {
		var b []byte
		if an != nil {
			b = an.chunk(c)
		} else {
			b = oa.chunk(c)
		}
		if len(b) == 0 || written != nil {
			return
		}
		_ = rc.SetWriteDeadline(writeDeadline(wt, by))
		if _, written = w.Write(b); written == nil {
			written = rc.Flush()
		}
	}
	emit(first)
	for written == nil && s.Next() {
		emit(s.Current())
	}
	if written != nil {
		// The caller went away: closing the stream cancels the upstream call, and the
		// Client reports the call's end (its tokens and cost) before Close returns.
		_ = s.Close()
		rec.class = failure.Canceled
		if c := clock.ended(); c != nil {
			rec.input, rec.output = c.input, c.output
			rec.cost, rec.costKnown = c.cost.Amount.Dollars(), c.cost.Known
			if c.attempts > 0 {
				rec.attempts = c.attempts
			}
		}
		rec.overhead = rec.overheadNow(clock)
		return
	}
	resp := s.Response()
	rec.fromResponse(resp)
	err = s.Err()
	if p := partialAnswer(err); p != nil {
		// A content filter or a refusal (or reasoning with no content) is the vendor's
		// answer, not a failure: the stream ends as the vendor ended it, with its finish
		// reason (already sent), its usage and [DONE] or message_stop, as the one-shot
		// answer is a 200.
		rec.fromError(err)
		if p.Usage == (llmclient.Usage{}) {
			p.Usage = attemptsUsage(p.Attempts)
		}
		resp, err = p, nil
	}
	var tail []byte
	if err != nil {
		rec.fromError(err)
		e := fromError(err)
		if an != nil {
			tail = an.fail(e)
		} else {
			tail = oa.event(oaErrorBody{Error: oaErrorObject{Message: e.message, Type: e.oaType, Param: strOrNil(e.param), Code: strOrNil(e.oaCode)}})
		}
	} else if an != nil {
		tail = an.end(resp)
	} else {
		tail = nil
		if includeUsage {
			tail = append(tail, oa.usage(resp.Usage)...)
		}
		tail = append(tail, oaDone...)
	}
	_ = rc.SetWriteDeadline(time.Now().Add(wt))
	if _, err := w.Write(tail); err == nil {
		_ = rc.Flush()
	}
	rec.overhead = rec.overheadNow(clock)
}

// Serve serves the API on api and, when admin is not nil, the admin API on admin,
// until Shutdown. It returns nil as soon as Shutdown begins: the requests in flight are
// drained when Shutdown returns. When a listener fails, Serve shuts the gateway down
// itself, as Shutdown does with no deadline (the requests in flight get up to
// shutdown_grace, and their access log lines are written), and then returns that
// listener's error. Called after Shutdown began, it closes the listeners and returns nil
// at once.
func (g *Gateway) Serve(api, admin net.Listener) error {
	g.srvMu.Lock()
	// Shutdown sets closing before it reads servers: a Shutdown that has begun and
	// missed these servers is seen here, one that has not will find them.
	if g.closing.Load() {
		g.srvMu.Unlock()
		_ = api.Close()
		if admin != nil {
			_ = admin.Close()
		}
		return nil
	}
	apiSrv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	g.servers = append(g.servers, apiSrv)
	var adminSrv *http.Server
	if admin != nil {
		// AdminHandler bounds each request's body and answer; an idle keep-alive
		// connection is closed as the API's are.
		adminSrv = &http.Server{Handler: g.AdminHandler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
		g.servers = append(g.servers, adminSrv)
	}
	g.srvMu.Unlock()
	errc := make(chan error, 2)
	go func() { errc <- apiSrv.Serve(api) }()
	n := 1
	if adminSrv != nil {
		n++
		go func() { errc <- adminSrv.Serve(admin) }()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			// The other server's Serve returns into errc (room for both) while this
			// drains.
			_ = g.Shutdown(context.Background())
		}
	}
	return first
}

// Shutdown stops accepting requests (readiness turns false, new requests get 503),
// waits for the requests in flight, open streams included, until ctx ends or the
// configured shutdown_grace passes, then cuts those left (and waits up to a second
// for them to end, so that their access log lines are written), closes the Client (which
// sends what its stores hold back, such as budget spend queued while Redis did not
// answer, waiting at most 5 s) and releases the Client's stores. It is safe to call more than once: a later call waits for the
// shutdown under way to end and returns its result, and when its own ctx ends first it
// cuts that shutdown's drain as the first call's ctx would (so a second signal cuts a
// drain that a failed listener began).
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.srvMu.Lock()
	if g.closing.Load() {
		shut, cut := g.shut, g.cut
		g.srvMu.Unlock()
		select {
		case <-shut:
		case <-ctx.Done():
			cut()
			<-shut
		}
		return g.shutErr
	}
	grace := g.state.Load().cfg.ShutdownGrace.D()
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	g.cut, g.shut = cancel, make(chan struct{})
	g.closing.Store(true)
	servers := g.servers
	g.srvMu.Unlock()
	defer close(g.shut)
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Shutdown(ctx); err != nil {
				_ = s.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		// The requests cut end as their connections close: wait for them a moment,
		// so that their access log lines are written before the log is flushed.
		g.waitHandlers(time.Second)
	}
	// The Client's Close sends what its stores hold back (the budget settles queued
	// while Redis did not answer, the shared breakers' pending trips) before they close.
	if err := g.client.Close(); err != nil {
		errs = append(errs, err)
	}
	g.close()
	g.shutErr = errors.Join(errs...)
	return g.shutErr
}

func (g *Gateway) handlerDone() {
	if g.handlers.Add(-1) == 0 && g.closing.Load() {
		g.handlersMu.Lock()
		if g.handlersIdle != nil {
			close(g.handlersIdle)
			g.handlersIdle = nil
		}
		g.handlersMu.Unlock()
	}
}

// waitHandlers waits, at most d, until no request is being served. Shutdown has
// begun: a handler that ends after the check below sees closing and wakes it.
func (g *Gateway) waitHandlers(d time.Duration) {
	g.handlersMu.Lock()
	if g.handlers.Load() == 0 {
		g.handlersMu.Unlock()
		return
	}
	if g.handlersIdle == nil {
		g.handlersIdle = make(chan struct{})
	}
	idle := g.handlersIdle
	g.handlersMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// warmFrontDoors runs the front doors' decoders and encoders once on samples, in New,
// so that the first requests do not pay for building encoding/json's per-type caches.
func warmFrontDoors() {
	_, _, _, _ = decodeOpenAIChat([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":1,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`))
	_, _, _ = decodeAnthropic([]byte(`{"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`))
	_, _, _ = decodeOpenAIEmbed([]byte(`{"model":"m","input":["hi"]}`))
	resp := &llmclient.Response{Text: "hello", FinishReason: finish.Stop, Usage: llmclient.Usage{InputTokens: 1, OutputTokens: 1}}
	_ = encodeOpenAIChat(resp, "chatcmpl-warm", "m", 0)
	_ = encodeAnthropic(resp, "msg_warm", "m", nil)
	oa := &oaStreamWriter{id: "chatcmpl-warm", model: "m"}
	_ = oa.chunk(llmclient.Chunk{Text: "hello"})
	_ = oa.chunk(llmclient.Chunk{FinishReason: finish.Stop})
	_ = oa.usage(resp.Usage)
	an := &anStreamWriter{id: "msg_warm", model: "m"}
	_ = an.chunk(llmclient.Chunk{Text: "hello"})
	_ = an.end(resp)
}
