package limitstore

// Levels returns what the main lane's request and token buckets hold now: a bucket's
// burst when it is full, less while it refills, negative while a request larger than the
// bucket is paid off; 0 for a dimension without a limit. It is for snapshots and
// metrics, not for admission.
func (s *memState) Levels() (requests, tokens float64) {
	now := s.now()
	s.mu.Lock()
	s.settleHeld(now)
	requests, tokens = s.main[0].level(now), s.main[1].level(now)
	s.mu.Unlock()
	return requests, tokens
}
