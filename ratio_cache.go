package llmclient

import "sync/atomic"

// ratioCache remembers the token ratio (ratioFor) of the model names seen lately, so that
// a call for a model seen before finds its ratio without matching it against every
// correction again: one slot per hash of the name, each holding the latest name that maps
// to it. Names longer than maxCachedRatioName are not kept (a name comes from the caller,
// or from a raw request body in transport mode). Safe for concurrent use.
type ratioCache struct {
	slots [64]atomic.Pointer[modelRatio]
}

type modelRatio struct {
	model string
	ratio float64
}

// maxCachedRatioName bounds the names the cache keeps, and so its memory.
const maxCachedRatioName = 128

// slot returns model's slot.
func (rc *ratioCache) slot(model string) *atomic.Pointer[modelRatio] {
	n := uint(len(model))
	h := n*31 + uint(model[n/2])*7 + uint(model[n-1])
	return &rc.slots[h%uint(len(rc.slots))]
}

// cacheable reports whether the cache keeps model's ratio.
func (rc *ratioCache) cacheable(model string) bool {
	return rc != nil && model != "" && len(model) <= maxCachedRatioName
}

// get returns model's remembered ratio.
func (rc *ratioCache) get(model string) (float64, bool) {
	if !rc.cacheable(model) {
		return 0, false
	}
	if m := rc.slot(model).Load(); m != nil && m.model == model {
		return m.ratio, true
	}
	return 0, false
}

// put remembers model's ratio, in place of the slot's last name.
func (rc *ratioCache) put(model string, ratio float64) {
	if rc.cacheable(model) {
		rc.slot(model).Store(&modelRatio{model: model, ratio: ratio})
	}
}
