package llmclient

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// A key's limiter learns from the quota its upstream reports in response headers
// (x-ratelimit-{limit,remaining,reset}-{requests,tokens}, anthropic-ratelimit-*), on every
// answer that carries them, four things (limiter_window.go has the first):
//
//  1. The windows. Each dimension's limit, remaining and reset say how the upstream meters
//     it: remaining + reset × limit/minute is the bucket the reset refills (a reset of 0:
//     the bucket is full and holds remaining). About the limit: a per-minute bucket.
//     Clearly less: a shorter enforcement window (a 6-second quantum, whose level
//     remaining reports), and the key's bucket shrinks to it. Clearly more: a longer
//     window (a day), whose rate is the limit over the window the reset implies; it
//     becomes the daily bucket. With Limits unset, these are the key's limits.
//  2. The level. The reported request's grant said what the state predicted would be left
//     once the upstream counted it; the report says what was. The state corrects its
//     buckets by the difference, both ways, less what it corrected since, and never twice
//     for one error, whichever request or replica reports it (limitstore.State.Sync). The
//     buckets need not be the same size: the state's is to be as far below full as the
//     upstream's. A process alone on its key that spends it all sees reports its own
//     admissions explain: however little is left, it keeps its full rate.
//  3. The charge. The state keeps a fit of what the upstream counted for the charges it
//     admitted against their estimates (limitstore.Fit): the charge multiplier, which
//     scales every later charge (Attempt.ChargedTokens). Alone on a key, or through a
//     shared store, it converges to what the upstream charges against the local estimate
//     (it counts characters, or its own tokenizer). A private state whose key other
//     processes use too counts their consumption in: its multiplier grows to about one
//     over its share, and its bucket then holds its share of the key's rate and burst,
//     whatever the number of processes. Such a state corrects only its share of each
//     error (see gainLocked). Before the headers say anything, the ratio of the usage's
//     prompt tokens to the estimate scales the prompt part of the charge.
//     A private state takes its key for shared as soon as one observation says so (see
//     knownLocked): processes that start together each admit a whole bucket until then.
//  4. The reserve. The charges admitted and not yet seen by the upstream (queued or in
//     flight) may be off: each bucket keeps in reserve their expected shortfall plus
//     three standard deviations of their noise, from the fit (see marginLocked), between
//     1% and 30% of the bucket, so that the next corrections come before a 429 would. A
//     private state whose key other processes use too keeps up to 60%: the noise is then
//     mostly the others' consumption, which it sees late and in lumps. The reserve is
//     quota the upstream holds unused whenever the key is saturated: under sustained
//     overload its bucket never falls below it, so it is what the key could have admitted
//     and did not when the load stops (once, not per minute).

const (
	// syncMargin is the reserve of a per-minute request bucket, and of a token bucket
	// until the fit is known, as a share of the bucket.
	syncMargin = 0.1
	// The token bucket's margin covers the errors of the charges admitted and not yet
	// reported (queued or in flight): marginSigmas standard deviations of their sum, as
	// the corrections' noise says, between minMargin and maxMargin of the bucket.
	// Calibrated, three standard deviations of a few seconds' charges are a fraction of
	// a percent of the bucket (0.3-0.5% of a 6-second quantum at twice its rate, in the
	// simulation); minMargin covers the errors that noise does not show: at a quarter of
	// a percent, a process at twice its quota met 429s on 0.6-1% of its calls; at 1%, on
	// 0-0.2%.
	marginSigmas = 3
	minMargin    = 0.01
	maxMargin    = 0.3
	// sharedMaxMargin bounds the margin of a private state whose key other processes use
	// too (gainLocked below 1), which rises at once to what the noise asks (it falls by
	// marginSmoothing) and is at that bound until the fit is known.
	sharedMaxMargin = 0.6
	// marginSmoothing: each report moves the margin an eighth of the way to what it
	// should be, so that it changes slowly beside the corrections.
	marginSmoothing = 8
	// dailyMargin is the reserve of a daily bucket.
	dailyMargin = 0.01
	// specTolerance is the relative change of a rate or burst that retunes the state.
	specTolerance = 0.02
	// minScale and maxScale bound the charge multiplier: an upstream charging a quarter of
	// the estimate, or a key shared by up to 32 processes.
	minScale = 0.25
	maxScale = 32
	// sharedAbove is the multiplier, against the usage ratio, above which a private state
	// takes its key for shared with other processes (see gainLocked).
	sharedAbove = 1.5
	// minRatio and maxRatio bound the usage ratio.
	minRatio = 0.25
	maxRatio = 4
	// hiddenRecovery and hiddenGrowth: a hidden window's burst grows back by a tenth
	// each half minute without a refusal that the reported window does not explain.
	hiddenRecovery = 30 * time.Second
	hiddenGrowth   = 1.1
	// usageAfter is the number of usage reports after which their ratio is used.
	usageAfter = 3
)

// headerSync is what a key's limiter learns from its upstream's headers. The hot path
// reads only its atomics; reports update the rest under mu. It is safe for concurrent use.
type headerSync struct {
	scale       atomic.Uint64 // float64 bits of the charge multiplier; 0: 1
	ratio       atomic.Uint64 // float64 bits of the usage ratio of prompts; 0: 1
	tokNanos    atomic.Int64  // the token bucket's nanoseconds per token; 0: no token bucket
	dailyTokens atomic.Bool   // a daily token bucket is in force
	calibrated  atomic.Bool   // the headers calibrate the charge
	long        atomic.Bool   // req or tok is a long window (see forgetLong)

	mu       sync.Mutex
	cfg      syncConfig
	req, tok window
	k        float64        // the charge multiplier
	fit      limitstore.Fit // the state's charge fit, as the last report left it
	// margin is the token margin, as a share of the bucket, of the last report; pending
	// what the last report left pending.
	margin  float64
	pending limitstore.Totals
	usageN  float64
	usageR  float64
	usageV  float64         // the variance of the usage ratio's reports
	applied limitstore.Spec // what the state enforces now
	// hidden is the token burst a hidden window allows (0: none seen), since hiddenAt
	// (see refusedLocked).
	hidden   float64
	hiddenAt time.Time
}

// syncConfig is what a headerSync needs of its limiter's configuration.
type syncConfig struct {
	base    limitstore.Spec // from Limits
	private bool
	// noisy: single charges are far off what the upstream counts by nature (cache reads
	// that are free, which no estimate sees coming), so that one observation does not
	// say the key is shared (see knownLocked).
	noisy bool
	// scope: the state is a quota scope's (or one of its parts'), which learns only the
	// windows that may be its own (scopeWindow).
	scope bool
	// spread: the usage ratio charged is its mean plus this many standard deviations of
	// the reports, at most 1 (0: the mean).
	spread                    float64
	burstFraction, batchShare float64
}

func (s *headerSync) init(spec limitstore.Spec, private bool, c *limiterConfig) {
	s.cfg = syncConfig{base: spec, private: private, burstFraction: c.burstFraction, batchShare: c.batchShare}
	s.k, s.applied, s.margin = 1, spec, syncMargin
	s.dailyTokens.Store(spec.DailyTokens.Limited())
}

// factor reads a float64 stored as bits in a, 1 when unset.
func factor(a *atomic.Uint64) float64 {
	if b := a.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

// estimate is a request's charge before the charge multiplier: its prompt estimate
// times the usage ratio, plus its reserved output, saturating at maxCost.
func (s *headerSync) estimate(prompt, out int) int {
	if r := s.ratio.Load(); r != 0 && prompt > 0 {
		prompt = ceilCost(float64(prompt) * math.Float64frombits(r))
	}
	return min(satAdd(prompt, out), maxCost)
}

// charge is what a request of the given estimate costs the token buckets: the estimate
// times the charge multiplier, saturating at maxCost.
func (s *headerSync) charge(estimate int) int {
	if k := s.scale.Load(); k != 0 {
		return ceilCost(float64(estimate) * math.Float64frombits(k))
	}
	return estimate
}

// ceilCost is int(min(math.Ceil(x), maxCost)), without a call (an admission computes
// one for each quantity): an integer's truncation is its ceiling up to one.
func ceilCost(x float64) int {
	x = min(x, maxCost)
	n := int(x)
	if float64(n) < x {
		n++
	}
	return n
}

// capacities returns the bursts of the per-minute request and token buckets the state
// enforces now (0 for a bucket without a limit), for Snapshot.
func (s *headerSync) capacities() (requests, tokens float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.applied.Requests; r.Limited() {
		requests = r.Size()
	}
	if r := s.applied.Tokens; r.Limited() {
		tokens = r.Size()
	}
	return requests, tokens
}

// prior is the usage ratio, 1 until known.
func (s *headerSync) prior() float64 {
	if s.usageN < usageAfter {
		return 1
	}
	return s.usageR
}

// usage learns the share of a prompt that counts: the input the key counted against the
// input the upstream reported.
func (s *headerSync) usage(prompt, input int) {
	if prompt < 50 || input <= 0 {
		return // too small to say anything of the ratio
	}
	r := min(max(float64(input)/float64(prompt), minRatio), maxRatio)
	s.mu.Lock()
	s.usageN++
	w := 1 / min(s.usageN, 20)
	d := r - s.usageR
	s.usageR += d * w
	s.usageV += (d*d*(1-w) - s.usageV) * w
	ratio := s.usageR
	if z := s.cfg.spread; z > 0 {
		ratio = min(ratio+z*math.Sqrt(s.usageV), 1)
	}
	s.mu.Unlock()
	s.ratio.Store(math.Float64bits(ratio))
}

// observe learns from one report of the upstream's quota: rl, read from the answer to the
// request whose lease is ls (nil or another limiter's: none); charged is false when the
// upstream did not count that request (it refused it). The report's request's grant
// must be given back already when it was not counted (settle runs first).
func (s *headerSync) observe(l *keyLimiter, rl *ratelimit.Status, ls *partLease, charged bool) {
	reqW, tokW := rl.Requests, rl.Tokens
	if !tokW.Known && rl.InputTokens.Known {
		tokW = rl.InputTokens // Anthropic's input-token window
	}
	if s.cfg.scope {
		reqW = scopeWindow(reqW, s.cfg.base.Requests, s.cfg.base.DailyRequests)
		tokW = scopeWindow(tokW, s.cfg.base.Tokens, s.cfg.base.DailyTokens)
	}
	if !reqW.Known && !tokW.Known {
		return
	}
	ctx := context.Background()
	now := time.Now()
	s.mu.Lock()
	s.req.learn(reqW)
	s.tok.learn(tokW)
	s.long.Store(s.req.long || s.tok.long)
	if !charged && ls != nil && ls.l == l && s.cfg.private {
		s.refusedLocked(reqW, tokW, ls, now)
	}
	spec, retune := s.retuneLocked(now)
	own := ls != nil && ls.l == l && ls.Grant.Mark > 0
	var rep limitstore.Report
	margin := syncMargin
	if own {
		margin = s.marginLocked()
		s.margin = margin
		rep = s.reportLocked(ls, reqW, tokW, charged, margin)
	}
	s.mu.Unlock()
	if retune {
		l.retune(ctx, spec)
	}
	if !own {
		return
	}
	c, err := l.state.Sync(ctx, rep)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.calibrateLocked(c)
	spec, retune = s.retuneLocked(now)
	k, known := s.k, s.fit.Known()
	s.mu.Unlock()
	s.scale.Store(math.Float64bits(k))
	s.calibrated.Store(known)
	if retune {
		l.retune(ctx, spec)
	}
}

// scopeWindow is rw when a quota scope whose configured buckets are minute and day may
// take it for its own window: one of a quantity the scope limits, whose reported limit is
// at least the scope's (within shortWindow), as a vendor reports the quota the scope
// stands for on each of its keys (Anthropic's class limit). Any other window (a smaller
// limit, a quantity the scope does not limit, no limit at all) is the key's own: its key's
// limiter learns it, and the scope, which other keys and upstreams share, ignores it
// (the zero Window).
func scopeWindow(rw ratelimit.Window, minute, day limitstore.Rate) ratelimit.Window {
	if !rw.Known || rw.Limit <= 0 {
		return ratelimit.Window{}
	}
	var w window
	w.learn(rw)
	r, span := minute, 60.0
	if w.long {
		r, span = day, secondsPerDay
	}
	if !r.Limited() || float64(rw.Limit) < shortWindow*r.PerSecond*span {
		return ratelimit.Window{}
	}
	return rw
}

// retuneLocked returns what the state should enforce and whether that changed: the
// configured limits met with the learned windows, and a hidden window's burst.
func (s *headerSync) retuneLocked(now time.Time) (limitstore.Spec, bool) {
	sp := s.cfg.base
	sp.Requests, sp.DailyRequests = s.req.merge(sp.Requests, sp.DailyRequests, s.cfg.burstFraction)
	sp.Tokens, sp.DailyTokens = s.tok.merge(sp.Tokens, sp.DailyTokens, s.cfg.burstFraction)
	if s.hidden > 0 && sp.Tokens.Limited() {
		if now.Sub(s.hiddenAt) >= hiddenRecovery {
			s.hidden, s.hiddenAt = s.hidden*hiddenGrowth, now
		}
		if s.hidden >= sp.Tokens.Burst {
			s.hidden = 0
		} else {
			sp.Tokens.Burst = s.hidden
		}
	}
	if closeSpec(sp, s.applied) {
		return sp, false
	}
	s.applied = sp
	return sp, true
}

// refusedLocked learns from a request the upstream refused although the window it
// reported clearly held it (twice its charge in tokens, two requests): the upstream
// enforces a shorter window than it reports, such as a 6-second
// quantum behind a per-minute remaining count. The token bucket's burst is halved, down
// to a second of its refill, and grows back by a tenth each half minute without another
// such refusal. Only a private state learns this: replicas sharing a store would each
// retune the shared buckets on their own refusals.
func (s *headerSync) refusedLocked(reqW, tokW ratelimit.Window, ls *partLease, now time.Time) {
	if !tokW.Known || float64(max(tokW.Remaining, 0)) < 2*float64(ls.Tokens) || reqW.Known && reqW.Remaining < 2 {
		return // the window it reported was short, or nearly: the refusal is explained
	}
	r := s.applied.Tokens
	if !r.Limited() {
		return
	}
	s.hidden, s.hiddenAt = max(r.Size()/2, r.PerSecond), now
}

// retune makes the state enforce spec.
func (l *keyLimiter) retune(ctx context.Context, spec limitstore.Spec) {
	_ = l.state.Retune(ctx, spec)
	l.sync.dailyTokens.Store(spec.DailyTokens.Limited())
	l.apply(spec)
}

// reportLocked compares the report with the grant of its request. The upstream's bucket
// and the state's need not be the same size (a minute's quota against ten seconds'
// worth): the state's is to be as far below full as the upstream's, less the margin.
func (s *headerSync) reportLocked(ls *partLease, reqW, tokW ratelimit.Window, charged bool, margin float64) limitstore.Report {
	// A request the upstream did not count was given back before its report: the
	// correction count has it, the prediction needs no change; its totals do.
	pred, totals := ls.Grant.Levels, ls.Grant.Totals
	if !charged {
		totals = totals.Sub(limitstore.Totals{Tokens: float64(ls.Tokens), Estimate: float64(ls.Estimate), Requests: 1})
	}
	target, reserve := limitstore.Unknown, limitstore.Unknown
	a := &s.applied
	req, reqR := s.req.target(reqW, a.Requests, a.DailyRequests, syncMargin)
	tok, tokR := s.tok.target(tokW, a.Tokens, a.DailyTokens, margin)
	if s.req.long {
		target.DailyRequests, reserve.DailyRequests = req, reqR
	} else {
		target.Requests, reserve.Requests = req, reqR
	}
	if s.tok.long {
		target.DailyTokens, reserve.DailyTokens = tok, tokR
	} else {
		target.Tokens, reserve.Tokens = tok, tokR
	}
	return limitstore.Report{Mark: ls.Grant.Mark, Predicted: pred, Target: target, Reserve: reserve,
		Totals: totals, Gain: s.gainLocked()}
}

// gainLocked is the part of each error a report corrects. A state that sees every
// consumer of its key (a shared store, or a private state whose multiplier says it is
// alone: within half again of the usage ratio) corrects all of it. A private state whose
// multiplier says that about n processes share the key corrects an nth: its bucket is
// already its share of the key's rate and burst, and the upstream's level also holds the
// others' savings (a process waiting to send a large prompt holds more than its share of
// the level), so that realigning the whole level at each report would import their
// lumps; each process correcting its share corrects the whole between them.
func (s *headerSync) gainLocked() float64 {
	if !s.cfg.private || s.cfg.noisy || !s.knownLocked() {
		return 1 // a noisy quantity's multiplier cannot tell other consumers from its noise
	}
	n := s.k / s.prior()
	if n < sharedAbove {
		return 1
	}
	return 1 / min(n, maxScale)
}

// marginLocked is the token bucket's margin, as a share of the bucket: what the charges
// admitted and not yet seen by the upstream (queued or in flight, as the last applied
// report left them) may fall short of what the upstream will count. That is their
// expected shortfall, if they were charged under a smaller multiplier than the fit's,
// plus marginSigmas standard deviations of their noise.
//
// A private state whose key other processes use too (gainLocked below 1) sees their
// consumption only through the upstream's level, late and in lumps: its noise is mostly
// theirs, and a 429 follows when they spend the level it counted on. Its margin rises at
// once to what the noise asks, up to sharedMaxMargin, and is that bound until the fit is
// known (the processes starting together know nothing of each other's pace yet). Since
// the reserve only lowers the level the buckets keep, not their rate, it costs about its
// size once: 60% of a 6-second quantum is 2% of what three minutes admit.
func (s *headerSync) marginLocked() float64 {
	burst := s.applied.Tokens.Size()
	f := &s.fit
	shared := s.gainLocked() < 1
	if shared && !f.Known() {
		return sharedMaxMargin
	}
	if !f.Known() || !(burst > 0) {
		return syncMargin
	}
	bound := maxMargin
	if shared {
		bound = sharedMaxMargin
	}
	est := max(s.pending.Estimate, 0)
	short := max(f.Ratio()*est-s.pending.Tokens, 0)
	want := min(max((short+marginSigmas*math.Sqrt(f.Noise*est))/burst, minMargin), bound)
	if shared && want > s.margin {
		return want
	}
	return s.margin + (want-s.margin)/marginSmoothing
}

// knownLocked reports whether the fit's multiplier is used: once the fit is known, and
// for a private state as soon as one observation says its key is shared (a multiplier
// above sharedAbove times the usage ratio): until the fit would be known, several
// processes starting on one key would each admit the whole of the upstream's level.
// A multiplier that high from one observation errs towards admitting too little.
func (s *headerSync) knownLocked() bool {
	f := &s.fit
	if f.Known() {
		return true
	}
	return s.cfg.private && !s.cfg.noisy && f.Reports >= 1 && f.Estimated >= 1 && f.Ratio() > sharedAbove*s.prior()
}

// calibrateLocked takes what the correction c says of the charges: the state's fit
// (limitstore.Fit), which every process sharing the state reads alike, and what it
// leaves pending.
func (s *headerSync) calibrateLocked(c limitstore.Correction) {
	s.fit, s.pending = c.Fit, c.Pending
	if s.knownLocked() {
		s.k = min(max(s.fit.Ratio(), minScale), maxScale)
	}
}

// syncLimits feeds the rate-limit headers read with a's answer to its key's limiter, and
// keeps them for Snapshot. charged says whether the upstream counted the attempt.
func (a *attempt) syncLimits(rl *ratelimit.Status, charged bool) {
	if rl != nil && a.key != nil {
		a.key.record(rl)
		a.key.limiter().observe(rl, &a.lease, charged)
	}
}

// unreported tells a's key's limiter that a's successful answer (one-shot, embedding, a
// stream as it opened or a Transport answer), whose headers were read, carried no quota
// report (see keyLimiter.unreported).
func (a *attempt) unreported() {
	if a.key != nil {
		a.key.limiter().unreported()
	}
}

// unreported tells the limiter that a successful answer carried no quota report. A long
// window (a day's quota) learned from earlier headers is then forgotten: a vendor that
// meters one reports it on every answer, so a window no longer reported was a broken or
// lying report, which must not throttle the key until its far reset. Windows of a minute
// are kept: they are bounded by their refill anyway. Cheap when nothing long was learned.
func (l *keyLimiter) unreported() {
	if l == nil {
		return
	}
	l.sync.forgetLong(l)
	for _, p := range l.parts {
		p.sync.forgetLong(p)
	}
	for _, s := range l.scopes {
		s.sync.forgetLong(s)
	}
}

// forgetLong forgets the long windows s learned, and retunes l's state without them.
func (s *headerSync) forgetLong(l *keyLimiter) {
	if !s.long.Load() {
		return
	}
	s.mu.Lock()
	if s.req.long {
		s.req = window{}
	}
	if s.tok.long {
		s.tok = window{}
	}
	s.long.Store(false)
	spec, retune := s.retuneLocked(time.Now())
	s.mu.Unlock()
	if retune {
		l.retune(context.Background(), spec)
	}
}

// observe feeds one report of the upstream's quota to the limiter (see headerSync.observe).
func (l *keyLimiter) observe(rl *ratelimit.Status, ls *limitLease, charged bool) {
	if l == nil || rl == nil {
		return
	}
	if !l.extra && l.qty == qtyTotal {
		l.sync.observe(l, rl, ls.own(), charged)
		return
	}
	// Each quantity learns from its own window (limiter_quantity.go), and each scope the
	// request passed from the windows of its model.
	l.observeView(rl, ls.own(), charged)
	own := ls != nil && ls.l == l
	for i, p := range l.parts {
		var pl *partLease
		if own {
			pl = &ls.parts[i]
		}
		p.observeView(rl, pl, charged)
	}
	for i, s := range l.scopes {
		if own && i < len(ls.more) && ls.more[i].l != nil {
			s.observe(rl, &ls.more[i], charged)
		} // else a scope the request did not pass
	}
}

// observeView feeds the part of rl that l's buckets meter (view) to its headerSync, with
// pl the charge of the reported request on them (nil: none).
func (l *keyLimiter) observeView(rl *ratelimit.Status, pl *partLease, charged bool) {
	if v := l.view(rl); v != (ratelimit.Status{}) {
		l.sync.observe(l, &v, pl, charged)
	}
}
