package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/llmclient/llmclient"
)

// Defaults of the options.
const (
	// DefaultTTL is how long an answer is kept by default.
	DefaultTTL = time.Hour
	// DefaultIdempotencyTTL is how long an answer is kept under its idempotency key by
	// default, and how long the first call under a key may run once its caller is gone.
	DefaultIdempotencyTTL = 10 * time.Minute
	// DefaultStoreTimeout bounds each store call by default.
	DefaultStoreTimeout = 250 * time.Millisecond
	// DefaultThreshold is the semantic cache's default cosine-similarity threshold.
	DefaultThreshold = 0.92
	// DefaultMaxSemanticEntries bounds the semantic index's questions by default.
	DefaultMaxSemanticEntries = 10_000
	// DefaultMaxSemanticBytes bounds the semantic index's memory by default (64 MiB,
	// like the memory store's DefaultMaxBytes).
	DefaultMaxSemanticBytes = 64 << 20
	// MaxEmbeddingDimensions is the longest embedding vector the semantic cache keeps:
	// a question whose embedding is longer is neither looked up nor indexed. Embedding
	// models answer a few thousand dimensions.
	MaxEmbeddingDimensions = 65_536
	// MaxTTL is the longest TTL kept; longer ones are clamped to it.
	MaxTTL = 365 * 24 * time.Hour
)

// Option configures a Cache (New) or a Semantic cache (NewSemantic). Each option's doc
// says which it applies to; the other ignores its value, but both New and NewSemantic
// refuse an invalid one (a negative bound, a threshold outside (0, 1]), which is a mistake
// wherever it is passed. The last of repeated options wins.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// PartitionFunc names the partition of a call: entries of one partition never serve
// another. "" is a partition too (every call without one shares it).
type PartitionFunc func(ctx context.Context, req *llmclient.Request) string

type config struct {
	ttl          time.Duration
	idemTTL      time.Duration
	storeTimeout time.Duration
	partition    PartitionFunc
	namespace    string
	metadataKeys []string
	dedup        bool
	observer     observer
	maxEntry     int

	threshold  float64
	maxEntries int
	maxBytes   int64
	guards     []Guard
}

func defaultConfig() config {
	return config{ttl: DefaultTTL, idemTTL: DefaultIdempotencyTTL, storeTimeout: DefaultStoreTimeout,
		partition: contextPartition, maxEntry: DefaultMaxEntryBytes,
		threshold: DefaultThreshold, maxEntries: DefaultMaxSemanticEntries, maxBytes: DefaultMaxSemanticBytes}
}

func (c *config) validate() error {
	var errs []error
	if c.ttl < 0 || c.idemTTL < 0 {
		errs = append(errs, errors.New("TTLs must not be negative"))
	}
	if c.storeTimeout < 0 {
		errs = append(errs, errors.New("store timeout must not be negative"))
	}
	if c.maxEntry < 0 {
		errs = append(errs, errors.New("max entry bytes must not be negative"))
	}
	if math.IsNaN(c.threshold) || c.threshold <= 0 || c.threshold > 1 {
		errs = append(errs, fmt.Errorf("similarity threshold %v is not in (0, 1]", c.threshold))
	}
	if c.maxEntries < 0 {
		errs = append(errs, errors.New("max semantic entries must not be negative"))
	}
	if c.maxBytes < 0 {
		errs = append(errs, errors.New("max semantic bytes must not be negative"))
	}
	if c.partition == nil {
		errs = append(errs, errors.New("nil partition function"))
	}
	for _, g := range c.guards {
		if g == nil {
			errs = append(errs, errors.New("nil guard"))
		}
	}
	c.ttl, c.idemTTL = min(c.ttl, MaxTTL), min(c.idemTTL, MaxTTL)
	if c.maxEntry == 0 {
		c.maxEntry = DefaultMaxEntryBytes
	}
	if c.maxEntries == 0 {
		c.maxEntries = DefaultMaxSemanticEntries
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxSemanticBytes
	}
	if len(errs) > 0 {
		return fmt.Errorf("llmclient/cache: %w", errors.Join(errs...))
	}
	return nil
}

func contextPartition(ctx context.Context, _ *llmclient.Request) string {
	return llmclient.PartitionFromContext(ctx)
}

// PartitionByMetadata returns the PartitionFunc that mirrors llmclient.WithPartitionLimits:
// the request's Metadata[metadataKey], else the context's partition
// (llmclient.WithPartition). Pass the key given to WithPartitionLimits, so that the cache
// and the limiter agree on who the caller is.
func PartitionByMetadata(metadataKey string) PartitionFunc {
	return func(ctx context.Context, req *llmclient.Request) string {
		if v := req.Metadata[metadataKey]; v != "" {
			return v
		}
		return llmclient.PartitionFromContext(ctx)
	}
}

// WithTTL sets how long an answer is kept (Cache and Semantic). 0 turns the cache's
// lookups and stores off, leaving de-duplication and idempotency; it must not be
// negative; longer than MaxTTL is clamped to MaxTTL. Default DefaultTTL (1h).
func WithTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.ttl = d }) }

// WithPartition sets how a call's partition is named (Cache and Semantic): tenants never
// share entries, in-flight calls or idempotency keys. Default: the context's partition
// (llmclient.WithPartition); see PartitionByMetadata.
func WithPartition(f PartitionFunc) Option { return optionFunc(func(c *config) { c.partition = f }) }

// WithNamespace adds ns to every key (Cache and Semantic), so that caches of different
// configurations sharing a store never answer each other. Change it when something
// outside the request changes the answers: an upstream's model mapping (keys use the
// model name as the caller sends it, before routing), an adapter option, a prompt
// template applied by other middleware. Default "".
func WithNamespace(ns string) Option { return optionFunc(func(c *config) { c.namespace = ns }) }

// WithKeyMetadata adds the named Request.Metadata entries to the key (Cache and
// Semantic); other metadata never changes it. Default: none.
func WithKeyMetadata(keys ...string) Option {
	return optionFunc(func(c *config) { c.metadataKeys = append([]string(nil), keys...) })
}

// WithDedup turns in-flight de-duplication on or off (Cache): identical Complete calls
// (same key) in flight at once share one upstream call. The shared call runs detached
// from each caller's cancellation: a caller that gives up returns at once and the others
// keep waiting; the call is canceled when every waiter is gone, or at the latest deadline
// among them. A shared call that panics panics in every caller waiting for it. Every
// waiter gets its own copy of the one answer, with the shared call's Attempts and Cost:
// to total what calls cost, count the shared call once (Stats.Shared says how many
// callers joined one; llmclient's event.Call and the otel module's llmclient.client.cost
// see the call once). Streams are not de-duplicated (see the package documentation).
// Default false.
func WithDedup(on bool) Option { return optionFunc(func(c *config) { c.dedup = on }) }

// WithIdempotencyTTL sets the idempotency window (Cache): how long an answer stays under
// its idempotency key (WithIdempotencyKey), and how long the first call under a key may
// run after its caller has gone, so that a repeated call can still get its answer. 0
// ignores idempotency keys; it must not be negative; longer than MaxTTL is clamped.
// Default DefaultIdempotencyTTL (10m).
func WithIdempotencyTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.idemTTL = d })
}

// WithStoreTimeout bounds each store call (Cache): a store that does not answer in time
// counts as a miss (or a failed store), so that a slow Redis never holds a request. A
// call does not wait for the store of its answer: the answer is returned, and stored on
// another goroutine, detached from the caller's cancellation, within the timeout (Flush
// waits for it). Until it is stored, a repeat of the call in the same process joins it if
// it was shared (WithDedup) or under an idempotency key, and gets the answer; another
// repeat, and a repeat on another replica, misses it. 0 means no bound but the caller's
// context, for lookups and stores alike: the store of an answer then holds its call,
// except a shared or idempotent call's, made on the goroutine that made the call. It must
// not be negative. A store that never blocks (NewMemory) is written before the call
// returns, whatever the timeout. A panic of the store or of the observer in a store
// behind its call, which no caller would get, is recovered and reported as a store error
// (ErrStorePanic). Default DefaultStoreTimeout (250ms). The timeout is the deadline of
// the context the Store is called with: it bounds a Store that returns when its context
// ends, as the Store contract asks, and not one that ignores it.
func WithStoreTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.storeTimeout = d })
}

// WithMaxEntryBytes bounds the entry of a streamed answer (Cache and Semantic), as
// Entry.Size counts it (the answer and its chunks): a longer answer is delivered in full
// but not stored, and a stream stops being recorded once its chunks pass the bound. The
// semantic cache bounds the entries of Complete answers too. 0 means the default; it must
// not be negative. Default DefaultMaxEntryBytes (1 MiB).
func WithMaxEntryBytes(n int) Option { return optionFunc(func(c *config) { c.maxEntry = n }) }

// WithObserver sets a callback for the cache's events (Cache and Semantic): hits, misses,
// bypasses, stores, shared calls, replays, guard rejections, store errors. It is called
// synchronously, never while the cache holds a lock, with the call's context: on the
// caller's goroutine, except for the store (EventStored, EventNotStored, EventStoreError)
// of a stream's answer, reported where the stream ends (in Next or Close), and of a shared
// or idempotent Complete call's answer, reported on the goroutine that makes the shared
// call, with its first caller's context values and without its cancellation, possibly
// after every caller has returned. The outcome of a store that may block (EventStored,
// EventStoreError; see WithStoreTimeout) is reported on the goroutine that stores the
// answer, with the call's context values and without its cancellation, after the call
// has returned. It must be safe for concurrent use. Default: none.
func WithObserver(f func(ctx context.Context, e Event)) Option {
	return optionFunc(func(c *config) { c.observer = f })
}

// WithThreshold sets the cosine similarity a cached question must reach to answer a new
// one (Semantic), in (0, 1]. Default DefaultThreshold (0.92). Tune it on your embedding
// model: scores differ between models.
func WithThreshold(t float64) Option { return optionFunc(func(c *config) { c.threshold = t }) }

// WithMaxEntries bounds the number of questions in the semantic index (Semantic): past
// it, the least recently used questions are dropped. 0 means the default; it must not be
// negative. Default DefaultMaxSemanticEntries (10,000). A lookup compares the question
// with every entry of its partition and context, so lookups cost grows with it. The
// index's memory is bounded too, by WithMaxSemanticBytes.
func WithMaxEntries(n int) Option { return optionFunc(func(c *config) { c.maxEntries = n }) }

// WithMaxSemanticBytes bounds the memory of the semantic index (Semantic), as
// SemanticStats.Bytes counts it: each question's answer (Entry.Size), text and embedding
// (4 bytes a dimension), plus a fixed overhead. Past it, the least recently used
// questions are dropped, as past WithMaxEntries; a question that alone is larger is not
// indexed (EventNotStored with ErrTooLarge), and its call is answered all the same. 0
// means the default; it must not be negative; math.MaxInt64 is accepted (no bound but
// WithMaxEntries). Default DefaultMaxSemanticBytes (64 MiB). The exact cache's memory
// store has its own bound, MemoryConfig.MaxBytes; Cache ignores this option.
func WithMaxSemanticBytes(n int64) Option { return optionFunc(func(c *config) { c.maxBytes = n }) }

// WithGuards adds guard rules (Semantic): a similar cached question answers a new one
// only if every guard accepts the pair. Default: none (similarity alone decides).
func WithGuards(g ...Guard) Option {
	return optionFunc(func(c *config) { c.guards = append(c.guards, g...) })
}
