package otel

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxCountedSets bounds the attribute sets llmclient.client.attempts counts separately;
// attempts of further sets are counted under overflowSet. (A variable for tests.)
var maxCountedSets = 4096

// overflowSet is where attempts beyond maxCountedSets distinct attribute sets are
// counted: the attribute the OpenTelemetry specification gives the overflow of a
// cardinality limit.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

// attemptCounts is llmclient.client.attempts: an observable counter over one atomic cell
// per attribute set, read at each collection. Counting an attempt is an atomic add on its
// set's cell, where a synchronous Add costs the SDK its options, an attribute-set lookup and
// an exemplar check on every attempt (BENCHMARKS.md §9). The cells outlive the set cache
// (Watch resets it), so a set's count never goes back. The sum exported is the same as a
// synchronous counter's; it carries no exemplars. It is safe for concurrent use.
type attemptCounts struct {
	mu       sync.Mutex
	cells    map[attribute.Distinct]*countCell
	order    []*countCell // the cells in the order made, for the callback
	overflow countCell
}

// countCell counts the attempts of one attribute set.
type countCell struct {
	set attribute.Set
	n   atomic.Int64
}

// cell returns the cell of set, made on first use; beyond maxCountedSets sets, the
// overflow cell.
func (a *attemptCounts) cell(set attribute.Set) *countCell {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cells[set.Equivalent()]; ok {
		return c
	}
	if len(a.order) >= maxCountedSets {
		return &a.overflow
	}
	if a.cells == nil {
		a.cells = map[attribute.Distinct]*countCell{}
	}
	c := &countCell{set: set}
	a.cells[set.Equivalent()] = c
	a.order = append(a.order, c)
	return c
}

// register makes the counter an observable one of meter and reports the cells to it.
func (a *attemptCounts) register(meter metric.Meter) (metric.Int64ObservableCounter, error) {
	a.overflow.set = overflowSet
	ctr, err := meter.Int64ObservableCounter("llmclient.client.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Upstream calls made by attempts."))
	if err != nil {
		return ctr, err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		a.mu.Lock()
		cells := a.order[:len(a.order):len(a.order)] // cells are only appended
		a.mu.Unlock()
		for _, c := range cells {
			o.ObserveInt64(ctr, c.n.Load(), metric.WithAttributeSet(c.set))
		}
		if n := a.overflow.n.Load(); n > 0 {
			o.ObserveInt64(ctr, n, metric.WithAttributeSet(a.overflow.set))
		}
		return nil
	}, ctr)
	return ctr, err
}
