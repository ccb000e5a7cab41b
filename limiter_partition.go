package llmclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// partitionConfig is the configuration of caller partitions.
type partitionConfig struct {
	on        bool
	key       string // the Request.Metadata key naming the partition; "" to use only the context
	limits    Limits // every partition's limits, unless overridden
	overrides map[string]Limits
}

func (p *partitionConfig) validate() error {
	var errs []error
	if err := p.limits.validate(); err != nil {
		errs = append(errs, fmt.Errorf("partition limits: %w", err))
	}
	for name, l := range p.overrides {
		if name == "" {
			errs = append(errs, errors.New("partition override with an empty name"))
		}
		if err := l.validate(); err != nil {
			errs = append(errs, fmt.Errorf("partition %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// limitsFor returns the limits of the named partition.
func (p *partitionConfig) limitsFor(name string) Limits {
	if l, ok := p.overrides[name]; ok {
		return l
	}
	return p.limits
}

// WithPartitionLimits limits every caller partition (a team, a tenant, a feature) to
// perPartition, on its own buckets, before an upstream is chosen: one partition cannot use
// up the keys' quota for the others. A request belongs to the partition named by its
// Metadata[metadataKey], else by the context (WithPartition); a request with neither is not
// limited by partition. An empty metadataKey consults only the context. The same options
// as for keys apply (WithLimiterMode, WithMaxWait, WithBatchShare, WithBurstFraction,
// WithLimitStore; a shared store sees the scope "partition:<name>"), and a request waits for
// its partition as for a key: within its deadline and WithMaxWait, without a bound when it
// has neither. Default: no partition limits.
func WithPartitionLimits(metadataKey string, perPartition Limits) Option {
	return optionFunc(func(c *config) {
		p := &c.limiter.partitions
		p.on, p.key, p.limits = true, metadataKey, perPartition
	})
}

// WithPartitionOverride sets the limits of the partition called name, in place of those
// of WithPartitionLimits; a zero Limits exempts the partition. It turns partitions on,
// with no limits for the partitions it does not name, when WithPartitionLimits is absent.
func WithPartitionOverride(name string, l Limits) Option {
	return optionFunc(func(c *config) {
		p := &c.limiter.partitions
		if p.overrides == nil {
			p.overrides = make(map[string]Limits)
		}
		p.on = true
		p.overrides[name] = l
	})
}

type partitionKey struct{}

// WithPartition returns a context whose requests belong to the named caller partition,
// when their Metadata does not name one (see WithPartitionLimits).
func WithPartition(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, partitionKey{}, name)
}

// PartitionFromContext returns the partition WithPartition set on ctx, or "".
func PartitionFromContext(ctx context.Context) string {
	name, _ := ctx.Value(partitionKey{}).(string)
	return name
}

// partitionLimiter holds one keyLimiter per partition, created on first use. A nil
// *partitionLimiter limits nothing. It is safe for concurrent use.
type partitionLimiter struct {
	cfg   *limiterConfig
	parts sync.Map // name → *partition; read without locking on every request
	mu    sync.Mutex
	// count is the number of partitions; sweepAt the count at which idle ones are next
	// dropped. Both are guarded by mu.
	count, sweepAt int
}

type partition struct {
	lim      *keyLimiter // nil: exempt
	lastUsed atomic.Int64
}

const (
	// partitionSweepMin is the smallest number of partitions at which idle ones are dropped.
	partitionSweepMin = 1024
	// partitionIdle is how long a partition must have been unused to be dropped: long
	// enough for any bucket to have refilled, so dropping it changes nothing. A partition
	// whose in-memory state is already back to a fresh one is dropped sooner.
	partitionIdle = 10 * time.Minute
	// maxPartitions bounds the partitions kept: past it, the least recently used ones with
	// nothing in flight are dropped even if their buckets have not refilled (they forget
	// their debt). Memory stays bounded whatever partition names callers send.
	maxPartitions = 10_000
)

// newPartitionLimiter returns the partition limiter of cfg, or nil when no partition
// limits are configured. The Client builds it once, in New.
func newPartitionLimiter(cfg *limiterConfig) *partitionLimiter {
	if !cfg.partitions.on {
		return nil
	}
	return &partitionLimiter{cfg: cfg}
}

// partitionOf names the caller partition of req: its Metadata under the configured key,
// else the context's (WithPartition); "" for none.
func (c *limiterConfig) partitionOf(ctx context.Context, req *Request) string {
	name := ""
	if k := c.partitions.key; k != "" {
		name = req.Metadata[k]
	}
	if name == "" {
		name = PartitionFromContext(ctx)
	}
	return name
}

// acquireInto admits req, of the given cost, against the limits of its partition, name,
// like keyLimiter.acquireInto: the lease goes to *ls (the run's own). A request in no
// partition, or in an exempt one, gets the zero lease.
func (p *partitionLimiter) acquireInto(ctx context.Context, name string, req *Request, cost int, ls *limitLease) (time.Duration, error) {
	if p == nil || name == "" {
		*ls = limitLease{}
		return 0, nil
	}
	part := p.get(name)
	if part.lim == nil {
		*ls = limitLease{}
		return 0, nil
	}
	part.lastUsed.Store(time.Now().UnixNano())
	adm := admission{out: cost, prio: req.Priority, within: -1}
	waited, err := part.lim.acquireInto(ctx, &adm, ls)
	if e, ok := err.(*Error); ok {
		e.Message = "partition " + strconv.Quote(name) + ": " + e.Message
	}
	return waited, err
}

// get returns the named partition, creating it on first use and dropping idle ones when
// there are many.
func (p *partitionLimiter) get(name string) *partition {
	if part, ok := p.parts.Load(name); ok {
		return part.(*partition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if part, ok := p.parts.Load(name); ok {
		return part.(*partition)
	}
	if p.count >= max(p.sweepAt, partitionSweepMin) {
		p.sweep(time.Now())
	}
	part := &partition{lim: newNamedKeyLimiter("partition:"+name, p.cfg.partitions.limitsFor(name), p.cfg)}
	part.lastUsed.Store(time.Now().UnixNano())
	p.parts.Store(name, part)
	p.count++
	return part
}

// sweep drops the partitions that dropping changes nothing for (nothing in flight, and
// unused for partitionIdle or back to a fresh state), then, past maxPartitions, the least
// recently used ones with nothing in flight. p.mu is held.
func (p *partitionLimiter) sweep(now time.Time) {
	cutoff := now.Add(-partitionIdle).UnixNano()
	type entry struct {
		name any
		used int64
	}
	var busyless []entry
	p.parts.Range(func(n, v any) bool {
		part := v.(*partition)
		if part.lim.InFlight() != 0 {
			return true
		}
		if used := part.lastUsed.Load(); used < cutoff || part.fresh() {
			p.parts.Delete(n)
			p.count--
		} else {
			busyless = append(busyless, entry{n, used})
		}
		return true
	})
	if p.count >= maxPartitions {
		slices.SortFunc(busyless, func(a, b entry) int { return cmp.Compare(a.used, b.used) })
		for _, e := range busyless {
			if p.count < maxPartitions*3/4 {
				break
			}
			p.parts.Delete(e.name)
			p.count--
		}
	}
	p.sweepAt = min(2*p.count, maxPartitions)
}

// fresh reports whether the partition's state equals a fresh one, so that dropping it
// loses nothing: only an in-memory state can tell.
func (part *partition) fresh() bool {
	if part.lim == nil {
		return true
	}
	ms, ok := part.lim.state.(interface{ Idle() bool })
	return ok && ms.Idle()
}
