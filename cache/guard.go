package cache

import (
	"math"
	"strings"
	"unicode"
)

// Guard decides whether a cached question may answer a new one that the embeddings found
// similar: it returns true to accept the pair. Embeddings put questions that share a topic
// close together even when they ask different things ("how do I get a refund" and "how
// do I return an item"); a guard keeps such pairs apart. A Guard must be safe for
// concurrent use; it is never called while the cache holds a lock.
type Guard func(question, cached string) bool

// RequireSameTerms returns a Guard that accepts a pair only if both questions contain the
// same subset of terms: the words that change what is asked in your domain ("refund",
// "return", "cancel", "invoice"). Terms match whole words, ignoring case; a term of
// several words matches them in sequence.
func RequireSameTerms(terms ...string) Guard {
	norm := make([][]string, 0, len(terms))
	for _, t := range terms {
		if w := Words(t); len(w) > 0 {
			norm = append(norm, w)
		}
	}
	return func(question, cached string) bool {
		q, c := Words(question), Words(cached)
		for _, t := range norm {
			if containsSeq(q, t) != containsSeq(c, t) {
				return false
			}
		}
		return true
	}
}

// MinTermOverlap returns a Guard that accepts a pair only if the questions' content words
// (Words without common English function words such as "how", "do", "I", "a") overlap by
// at least min, as the Jaccard index: shared words over all words. min is clamped to
// [0, 1]; NaN is taken as 1 (the strictest). Two questions without content words overlap
// fully.
func MinTermOverlap(min float64) Guard {
	if math.IsNaN(min) {
		min = 1
	}
	min = math.Max(0, math.Min(1, min))
	return func(question, cached string) bool {
		return overlap(contentWords(question), contentWords(cached)) >= min
	}
}

// Words splits s into lower-case words: runs of letters and digits. It is what the guards
// compare.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

func containsSeq(words, seq []string) bool {
	for i := 0; i+len(seq) <= len(words); i++ {
		match := true
		for j := range seq {
			if words[i+j] != seq[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// functionWords are left out of MinTermOverlap's comparison.
var functionWords = map[string]bool{
	"a": true, "an": true, "the": true, "i": true, "me": true, "my": true, "we": true, "our": true,
	"you": true, "your": true, "it": true, "its": true, "is": true, "are": true, "was": true, "be": true,
	"do": true, "does": true, "did": true, "can": true, "could": true, "would": true, "should": true,
	"will": true, "shall": true, "may": true, "might": true, "must": true, "how": true, "what": true,
	"when": true, "where": true, "which": true, "who": true, "why": true, "to": true, "of": true,
	"for": true, "in": true, "on": true, "at": true, "by": true, "with": true, "and": true, "or": true,
	"please": true, "there": true, "this": true, "that": true, "if": true, "so": true, "about": true,
}

func contentWords(s string) map[string]bool {
	out := make(map[string]bool)
	for _, w := range Words(s) {
		if !functionWords[w] {
			out[w] = true
		}
	}
	return out
}

// overlap is the Jaccard index of a and b; 1 when both are empty.
func overlap(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	shared := 0
	for w := range a {
		if b[w] {
			shared++
		}
	}
	return float64(shared) / float64(len(a)+len(b)-shared)
}
