// Package keysource defines where an upstream's API keys come from when they are not
// static: a [Source] (or a plain function, [Func]) that fetches a key and its expiry,
// for example from a secret manager or a token exchange.
//
// Sources are set with llmclient.Upstream.KeySources or changed live with
// llmclient.SetKeySources. The Client caches each key, refreshes it [Refresh] before
// it expires (or halfway through its remaining life, if that is sooner), keeps using
// a still-valid key when a refresh fails, and reports a source that cannot produce a
// key as [ErrFailed].
//
// A call waits for a source within its deadline (or the Client's call budget) and at
// most a minute after the refresh it waits for started. A refresh that runs longer goes
// on, on its own goroutine, and its result is used when the source returns; meanwhile
// calls go on with a still-valid key, and a call whose key has expired fails at once
// with [ErrFailed] (llmclient.ErrNoKey) rather than wait. Since the Client never calls a
// source twice at once, a source whose Key never returns keeps its key out until
// Client.Update replaces it with another source value.
package keysource

import (
	"context"
	"errors"
	"time"
)

// Source supplies a credential that changes over time: an OAuth access token (Vertex
// AI), an Azure Entra ID token, a key read from a secret manager. Key returns the current
// credential and when it expires; a zero expiry means it does not expire, and the Client
// keeps it for the life of the pool (Client.Update with a new source replaces it).
//
// The Client calls Key on a goroutine of its own, with the context of the call that
// needs a credential: the first call, and later the first call that finds the credential
// within its refresh window (see Refresh) while the others go on with the current one.
// That call, and any whose credential has expired, wait for Key within their deadline
// and at most a minute (see the package documentation). Key must return when its
// context ends, which is at that call's deadline (or the Client's call budget) or when
// the call is canceled: a Key that ignores its context holds its goroutine and keeps
// the key out until it returns. Key must be safe for concurrent use, although the
// Client never calls one source twice at once. A credential is never logged or put in an error, an event or a
// formatted Upstream; an upstream's error message that echoes it is redacted like a
// static key's.
type Source interface {
	Key(ctx context.Context) (key string, expires time.Time, err error)
}

// Func adapts a function to Source.
type Func func(ctx context.Context) (key string, expires time.Time, err error)

// Key calls f.
func (f Func) Key(ctx context.Context) (string, time.Time, error) { return f(ctx) }

// Refresh is how long before its expiry a source's credential is refreshed: 5
// minutes, or half the credential's lifetime when that is shorter. A refresh that fails
// keeps the current credential until it expires, trying again at most once per
// keySourceRetry; an expired credential whose refresh fails makes the attempt fail with
// failure.Unavailable (llmclient.ErrNoKey), which fails over like every key of the upstream being out.
const Refresh = 5 * time.Minute

// ErrFailed is wrapped by the error of an attempt whose key source returned an error
// or an empty key, with no valid credential left.
var ErrFailed = errors.New("llmclient: key source failed")
