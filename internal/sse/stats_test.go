package sse_test

import "runtime"

// runtimeStats samples the allocator's cumulative counters.
type runtimeStats struct{ totalAlloc uint64 }

func (s *runtimeStats) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.totalAlloc = m.TotalAlloc
}
