package redisstore

import "github.com/redis/go-redis/v9"

// Scripts are the store's scripts by name, for the black-box tests that feed them
// arguments no Store would send.
var Scripts = map[string]*redis.Script{
	"reserve": reserveScript, "adjust": adjustScript, "sync": syncScript, "retune": retuneScript,
	"block": blockScript, "blocked": blockedScript, "slot": slotScript, "renew": renewScript,
}
