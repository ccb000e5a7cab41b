package llmclient

import (
	"sync"
	"time"
)

// Cache reads predicted. Where a vendor does not count the input read from its prompt
// cache (ratelimit.Rule.CacheReadsFree: Anthropic's ITPM), a prompt's charge depends on
// whether its prefix is in the cache, which no estimate of the prompt tells. The vendor
// caches a prefix it was sent (Anthropic: up to a cache_control breakpoint) for a few
// minutes after its last use: a prompt whose prefix the Client sent within that time will
// read what that call read or wrote. The Client remembers, for the prefixes of the calls
// it made to such vendors (the model and the first readsPrefix bytes of the prompt, or its
// Request.PromptCacheKey, as WithCacheAffinity hashes them), the input that call read from
// or wrote to the cache, for readsTTL after the call (prompts shorter than readsPrefix are
// not remembered). A later
// call with the same prefix is charged its prompt estimate less that, with no usage ratio;
// a call whose prefix the Client has not sent (or too long ago) is charged its estimate
// times the usage ratio, which learns only from such calls. Each Client remembers its own
// calls: replicas sharing a store each learn a prefix on their own first call with it.

const (
	// readsPrefix is the prefix, in bytes of the request, that tells prompts apart.
	readsPrefix = 1024
	// readsTTL is how long a vendor keeps a prefix cached after its last use (Anthropic's
	// default five minutes).
	readsTTL = 5 * time.Minute
	// maxReads bounds the prefixes remembered.
	maxReads = 4096
)

// cacheReads is the prefixes a Client remembers. It is safe for concurrent use.
type cacheReads struct {
	mu sync.Mutex
	m  map[uint64]cachedPrefix
}

// cachedPrefix is what one call with the prefix read from or wrote to the cache, and when
// it ended.
type cachedPrefix struct {
	cached int
	at     int64
}

// lookup returns the cached input predicted for the prefix h at now, and whether it is known.
func (r *cacheReads) lookup(h uint64, now time.Time) (int, bool) {
	if r == nil || h == 0 {
		return 0, false
	}
	r.mu.Lock()
	e, ok := r.m[h]
	r.mu.Unlock()
	if !ok || now.UnixNano()-e.at >= int64(readsTTL) {
		return 0, false
	}
	return e.cached, true
}

// record remembers what the call with prefix h and prompt estimate est read from or
// wrote to the cache, as u reports it: in the vendor's tokens, which the estimates are
// calibrated to (the model family's calibration), at most est.
func (r *cacheReads) record(h uint64, est int, u *Usage, now time.Time) {
	if r == nil || h == 0 || u == nil || u.Estimated || u.InputTokens <= 0 || est <= 0 {
		return
	}
	cached := min(max(u.CachedInputTokens, 0)+max(u.CacheWriteTokens, 0), u.InputTokens)
	e := cachedPrefix{cached: min(cached, est), at: now.UnixNano()}
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[uint64]cachedPrefix)
	}
	if _, ok := r.m[h]; !ok && len(r.m) >= maxReads {
		for k, x := range r.m {
			if e.at-x.at >= int64(readsTTL) {
				delete(r.m, k)
			}
		}
		if len(r.m) >= maxReads {
			clear(r.m)
		}
	}
	r.m[h] = e
	r.mu.Unlock()
}
