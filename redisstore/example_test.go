package redisstore_test

import (
	"log"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// Every replica builds its Client the same way: the same prefix, upstream names, keys and
// limits. While Redis is away each replica admits a quarter of the quota on its own.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.WithPrefix("myapp"), redisstore.WithLocalShare(0.25))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	var provider llmclient.Provider // an adapter, such as openai.New(...)
	client, err := llmclient.New(
		llmclient.WithLimitStore(store),
		llmclient.WithUpstream(llmclient.Upstream{
			Name:     "openai",
			Provider: provider,
			Keys:     []string{"sk-..."},
			Limits:   llmclient.Limits{RPM: 600, TPM: 100_000, MaxConcurrent: 8},
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = client
}
