package fake

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
)

// Provider is a scripted llmclient.Provider. Each call, to Complete or Stream, plays the
// next step of its script and is recorded. Create it with New. It is safe for concurrent
// use: concurrent calls take steps in the order they acquire the Provider's lock.
type Provider struct {
	mu      sync.Mutex
	script  []entry
	used    []int // plays of each leaf, jumps taken by each jump, this round
	pos     int   // entry that serves the next call
	served  int   // calls that took a step
	records []Record
	// maxEmbedBatch is what MaxEmbedBatch reports; 0 means DefaultMaxEmbedBatch.
	maxEmbedBatch int
}

var _ llmclient.Provider = (*Provider)(nil)

// New returns a Provider that plays steps in order, one per call; see the package doc.
// The steps are copied: changing them after New has no effect. Nil steps are skipped.
// With no steps, every call fails with ErrExhausted.
func New(steps ...Step) *Provider {
	var script []entry
	for _, s := range steps {
		if s != nil {
			script = s.compile(script)
		}
	}
	return &Provider{script: script, used: make([]int, len(script))}
}

// Complete plays the next step as a one-shot call.
//
// A call whose context is already done is recorded but takes no step: it returns an error
// wrapping the context's error, as a real transport would before sending anything.
func (p *Provider) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	resp, _, err := p.call(ctx, call, false)
	return resp, err
}

// Stream plays the next step as a streaming call. It returns once the step's Latency has
// passed; a Fail or Error step's error is returned here, as a non-2xx status or a failed
// connection would be. A call whose context is already done takes no step, as in Complete.
func (p *Provider) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	_, st, err := p.call(ctx, call, true)
	return st, err
}

func (p *Provider) call(ctx context.Context, call *llmclient.Call, stream bool) (*llmclient.Response, llmclient.ProviderStream, error) {
	if call == nil {
		return nil, nil, misuse("fake: nil call")
	}
	rec := newRecord(call, stream, time.Now())
	p.mu.Lock()
	p.records = append(p.records, rec)
	if ctx.Err() != nil {
		p.mu.Unlock()
		return nil, nil, ctxError(ctx)
	}
	l := p.next()
	n := p.served
	p.mu.Unlock()
	if l == nil {
		return nil, nil, exhausted(n)
	}
	return l.play(ctx, call, stream, n)
}

// next takes the step that serves the next call, or returns nil when the script is spent.
// p.mu must be held.
func (p *Provider) next() leaf {
	for p.pos < len(p.script) {
		e := &p.script[p.pos]
		if !e.forever && p.used[p.pos] >= e.times {
			p.pos++
			continue
		}
		if !e.forever {
			p.used[p.pos]++
		}
		if e.leaf != nil {
			p.served++
			return e.leaf
		}
		// A jump: start the loop body's round afresh. The body holds a playable leaf
		// (compile drops empty loops), so this cannot spin.
		clear(p.used[e.target:p.pos])
		p.pos = e.target
	}
	return nil
}

// Calls returns the number of calls received, including those that failed because the
// script was exhausted or the context was done.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.records)
}

// Requests returns a copy of the record of every call received, in arrival order.
func (p *Provider) Requests() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.records)
}

// Remaining returns how many more calls the script will serve before it is exhausted, or
// -1 when it never runs out (a Forever step or a Loop lies ahead). A test can assert that
// its code used the whole script with Remaining() == 0.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for i := p.pos; i < len(p.script); i++ {
		e := &p.script[i]
		var n int
		switch {
		case e.forever:
			n = unbounded
		case e.leaf != nil:
			n = e.times - p.used[i]
		default:
			n = mul(e.times-p.used[i], p.plays(e.target, i))
		}
		total = add(total, max(n, 0))
	}
	if total == unbounded {
		return -1
	}
	return total
}

// plays returns the calls entries [from, to) serve in one fresh round.
func (p *Provider) plays(from, to int) int {
	total := 0
	for i := from; i < to; i++ {
		e := &p.script[i]
		var n int
		switch {
		case e.forever:
			n = unbounded
		case e.leaf != nil:
			n = max(e.times, 0)
		default:
			n = mul(max(e.times, 0), p.plays(e.target, i))
		}
		total = add(total, n)
	}
	return total
}

// Reset rewinds the script to its first step and forgets every recorded call.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pos, p.served, p.records = 0, 0, nil
	clear(p.used)
}

// unbounded stands for "never runs out" in play counts. add and mul saturate finite
// counts at maxFinite, so a huge finite script never reads as an endless one.
const (
	unbounded = int(^uint(0) >> 1)
	maxFinite = unbounded - 1
)

func add(a, b int) int {
	switch {
	case a == unbounded || b == unbounded:
		return unbounded
	case a > maxFinite-b:
		return maxFinite
	}
	return a + b
}

func mul(a, b int) int {
	switch {
	case a == 0 || b == 0:
		return 0
	case a == unbounded || b == unbounded:
		return unbounded
	case a > maxFinite/b:
		return maxFinite
	}
	return a * b
}
