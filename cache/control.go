package cache

import (
	"context"
	"time"
)

// Control is a request's cache directive, in the spirit of HTTP's Cache-Control request
// directives. The zero Control uses the cache normally.
type Control struct {
	// NoCache skips the lookup but stores the answer: the caller wants a fresh answer
	// and lets later callers reuse it (HTTP no-cache).
	NoCache bool
	// NoStore neither looks up nor stores the answer, nor keeps it under an idempotency
	// key: nothing of the request or its answer enters a store (HTTP no-store). It still
	// joins an identical call in flight when de-duplication is on.
	NoStore bool
	// MaxAge accepts only entries younger than it (HTTP max-age). 0 accepts any entry
	// the store still holds; a negative MaxAge accepts none, like NoCache.
	MaxAge time.Duration
}

type controlKey struct{}

// WithControl returns a context whose calls follow c. It applies to the exact cache and
// the semantic cache.
func WithControl(ctx context.Context, c Control) context.Context {
	return context.WithValue(ctx, controlKey{}, c)
}

// ControlFrom returns the Control WithControl set on ctx, or the zero Control.
func ControlFrom(ctx context.Context) Control {
	c, _ := ctx.Value(controlKey{}).(Control)
	return c
}

// accepts reports whether an entry created at created may serve a call at now.
func (c Control) accepts(created, now time.Time) bool {
	switch {
	case c.NoCache || c.NoStore || c.MaxAge < 0:
		return false
	case c.MaxAge == 0:
		return true
	}
	return now.Sub(created) < c.MaxAge
}

// lookup reports whether the cache may be consulted at all.
func (c Control) lookup() bool { return !c.NoCache && !c.NoStore && c.MaxAge >= 0 }

type idempotencyKey struct{}

// WithIdempotencyKey returns a context whose calls carry the idempotency key key: a call
// repeated with the same key (and the same request) within the cache's idempotency window
// gets the answer of the first call, whether it is still in flight or has arrived,
// instead of calling the upstream again. See the package documentation for what this can
// and cannot save per vendor. An empty key removes the key.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// IdempotencyKeyFrom returns the key WithIdempotencyKey set on ctx, or "".
func IdempotencyKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}
