package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Scripts are the store's scripts by name, for the black-box tests that feed them
// arguments no Store would send.
var Scripts = map[string]*redis.Script{
	"reserve": reserveScript, "adjust": adjustScript, "sync": syncScript, "retune": retuneScript,
	"block": blockScript, "blocked": blockedScript, "slot": slotScript, "renew": renewScript,
}

// WithClock makes the bucket scripts compute with clock instead of the server's TIME, for
// a test in virtual time; the clock must lie between 2005 and 2255.
func WithClock(clock func() time.Time) Option {
	return optionFunc(func(c *config) { c.clock = clock })
}
