package llmclient

import "sync/atomic"

// ratioCache remembers what the limiter needs of the model names seen lately (info: the
// family and the token ratio), so that a call for a model seen before finds them without
// matching the name against every rule again: one slot per hash of the name, each holding
// the latest name that maps to it. Names longer than maxCachedRatioName are not kept (a
// name comes from the caller, or from a raw request body in transport mode). Safe for
// concurrent use.
type ratioCache struct {
	slots [64]atomic.Pointer[modelInfo]
}

// maxCachedRatioName bounds the names the cache keeps, and so its memory.
const maxCachedRatioName = 128

// slot returns model's slot.
func (rc *ratioCache) slot(model string) *atomic.Pointer[modelInfo] {
	n := uint(len(model))
	h := n*31 + uint(model[n/2])*7 + uint(model[n-1])
	return &rc.slots[h%uint(len(rc.slots))]
}

// cacheable reports whether the cache keeps model's entry.
func (rc *ratioCache) cacheable(model string) bool {
	return rc != nil && model != "" && len(model) <= maxCachedRatioName
}

// get returns model's remembered entry, nil when none.
func (rc *ratioCache) get(model string) *modelInfo {
	if !rc.cacheable(model) {
		return nil
	}
	if m := rc.slot(model).Load(); m != nil && m.model == model {
		return m
	}
	return nil
}

// put remembers m, in place of its slot's last name.
func (rc *ratioCache) put(m *modelInfo) {
	if rc.cacheable(m.model) {
		rc.slot(m.model).Store(m)
	}
}
