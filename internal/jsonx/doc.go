// Package jsonx holds the JSON helpers shared by the provider adapters: merging
// Request.Extra into an encoded request body and compacting raw JSON for token estimates.
// Its functions are pure and safe for concurrent use.
package jsonx
