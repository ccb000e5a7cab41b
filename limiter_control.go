package llmclient

import (
	"context"
	"errors"

	"github.com/llmclient/llmclient/limitstore"
)

// unblocker is a limitstore.State that can end its scope's pause and eviction before
// their time, for every caller of the scope: an operator's restore of a key.
type unblocker interface {
	Unblock(ctx context.Context) error
}

// errCannotLift: the key's limit state cannot end a pause or eviction early.
var errCannotLift = errors.New("the limit store cannot lift a key's pause or eviction early")

// lift ends the pause (after a rate limit) and the eviction the scope's state holds, for
// every caller of the scope, and returns what was left of them. A state that holds none
// is left as it is; one that cannot lift them early keeps them and returns errCannotLift.
func (l *keyLimiter) lift(ctx context.Context) (limitstore.Block, error) {
	if l == nil {
		return limitstore.Block{}, nil
	}
	b, err := l.state.Blocked(ctx)
	if err != nil || b.Paused <= 0 && b.Evicted <= 0 {
		return limitstore.Block{}, err
	}
	u, ok := l.state.(unblocker)
	if !ok {
		return limitstore.Block{}, errCannotLift
	}
	if err := u.Unblock(ctx); err != nil {
		return limitstore.Block{}, err
	}
	return b, nil
}
