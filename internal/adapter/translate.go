package adapter

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// Unsupported returns the local refusal of a request the adapter cannot send to its
// vendor at all: a failure.BadRequest *llmclient.Error with Model set, the message
// "<pkg>: <why>", and a cause wrapping llmclient.ErrUnsupported, so that the Client can
// move the request to an upstream that takes it. It is returned before any HTTP call.
func Unsupported(pkg, model, why string) *llmclient.Error {
	return &llmclient.Error{
		Class:   failure.BadRequest,
		Model:   model,
		Message: pkg + ": " + why,
		Err:     fmt.Errorf("%w: %s", llmclient.ErrUnsupported, why),
	}
}

// Notes collects the notes an adapter makes while translating one request, each
// prefixed with the adapter's package name, without duplicates. The zero value is not
// usable; build it with NewNotes. Not safe for concurrent use.
type Notes struct {
	pkg  string
	list []string
	seen map[string]bool
}

// NewNotes returns an empty Notes for the adapter package pkg.
func NewNotes(pkg string) *Notes { return &Notes{pkg: pkg} }

// Add records one note, formatted with fmt.Sprintf; a note already recorded is dropped.
// Add on a nil *Notes does nothing.
func (n *Notes) Add(format string, args ...any) {
	if n == nil {
		return
	}
	s := n.pkg + ": " + fmt.Sprintf(format, args...)
	if n.seen[s] {
		return
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[s] = true
	n.list = append(n.list, s)
}

// List returns the notes in the order they were added; nil when there are none.
func (n *Notes) List() []string {
	if n == nil {
		return nil
	}
	return n.list
}

// Clamp checks an optional sampling parameter against the vendor's range [lo, hi]. It
// returns v itself when it is nil or in range, and a pointer to the nearest bound, with a
// note, when it is outside. A NaN or infinite value is an error: no vendor takes it.
func Clamp(notes *Notes, name string, v *float64, lo, hi float64) (*float64, error) {
	if v == nil {
		return nil, nil
	}
	x := *v
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return nil, errors.New(name + " is not a finite number")
	case x < lo:
		notes.Add("%s %s raised to the minimum %s", name, fmtFloat(x), fmtFloat(lo))
		return &lo, nil
	case x > hi:
		notes.Add("%s %s lowered to the maximum %s", name, fmtFloat(x), fmtFloat(hi))
		return &hi, nil
	}
	return v, nil
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// LimitStops returns the first max stop sequences, with a note when it drops any.
func LimitStops(notes *Notes, stop []string, max int) []string {
	if len(stop) <= max {
		return stop
	}
	notes.Add("kept the first %d of %d stop sequences (the vendor's maximum); dropped %q", max, len(stop), stop[max:])
	return stop[:max]
}

// Tool-call ids cross vendors: a conversation begun on one vendor carries that vendor's
// ids (Gemini's "call_0__thought__<base64 signature>", OpenAI-compatible
// "functions.get_weather:0", Anthropic "toolu_…"), which another vendor may reject. The
// adapters map them on the way out, deterministically: the same id always maps to the
// same wire id, in a call and in its result, in every request of a conversation, so the
// caller keeps the ids it has and a conversation can move between vendors freely.

// patternPrefix marks an id that PatternID encoded.
const patternPrefix = "lcid_"

// PatternID maps id to one that matches ^[a-zA-Z0-9_-]+$ (Anthropic's tool id pattern):
// such an id is kept as it is; any other (and one that starts with "lcid_" itself) becomes
// "lcid_" followed by its unpadded base64url encoding, whose alphabet is the pattern's.
// UnpatternID reverses it.
func PatternID(id string) string {
	if id != "" && !strings.HasPrefix(id, patternPrefix) && matchesPattern(id) {
		return id
	}
	return patternPrefix + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// UnpatternID returns the id PatternID encoded as wire, or wire itself when it is not an
// encoded id.
func UnpatternID(wire string) string {
	rest, ok := strings.CutPrefix(wire, patternPrefix)
	if !ok {
		return wire
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return wire
	}
	return string(b)
}

func matchesPattern(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// hashPrefix marks an id that CapID shortened.
const hashPrefix = "lch_"

// CapID maps id to one of at most max bytes (max >= 16): an id that fits is kept (unless
// it starts with "lch_"); a longer one becomes "lch_" followed by hex digits of its
// SHA-256, as many as fit. The mapping cannot be reversed, but it is deterministic, so a
// tool call and its result keep matching; the caller never sees the short form, since
// responses carry the vendor's own new ids.
func CapID(id string, max int) string {
	if len(id) <= max && !strings.HasPrefix(id, hashPrefix) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])
	if n := max - len(hashPrefix); n < len(h) {
		h = h[:n]
	}
	return hashPrefix + h
}
