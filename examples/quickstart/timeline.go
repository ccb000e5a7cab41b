package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// timeline prints the Client's events as they happen, with the time since the demo began.
type timeline struct {
	start time.Time
	mu    sync.Mutex
}

func (t *timeline) stamp() string {
	return fmt.Sprintf("[%6.3fs]", time.Since(t.start).Seconds())
}

func (t *timeline) observe(_ context.Context, e llmclient.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := ""
	if e.Key != "" {
		key = " " + e.Key
	}
	switch e.Kind {
	case event.Attempt:
		outcome := "ok"
		if e.Class == failure.Unavailable {
			fmt.Printf("%s attempt %d -> %s: skipped, no call made (%v)\n", t.stamp(), e.Attempt, e.Upstream, errors.Unwrap(e.Err))
			return
		}
		if e.Err != nil {
			outcome = e.Class.String()
			if e.Status != 0 {
				outcome = fmt.Sprintf("%d %s", e.Status, outcome)
			}
		}
		wait := ""
		if e.Waited > 0 {
			wait = fmt.Sprintf(" (after waiting %v)", e.Waited.Round(time.Millisecond))
		}
		fmt.Printf("%s attempt %d -> %s%s: %s in %v%s\n", t.stamp(), e.Attempt, e.Upstream, key, outcome,
			e.Latency.Round(time.Millisecond), wait)
	case event.Breaker:
		fmt.Printf("%s breaker %s: %s -> %s\n", t.stamp(), e.Upstream, e.From, e.To)
	case event.KeyCooldown:
		fmt.Printf("%s %s%s cools down until +%v for every caller\n", t.stamp(), e.Upstream, key,
			e.Until.Sub(t.start).Round(time.Millisecond))
	case event.KeyEvicted, event.Alert:
		fmt.Printf("%s %s %s%s: %v\n", t.stamp(), e.Kind, e.Upstream, key, e.Class)
	}
}
