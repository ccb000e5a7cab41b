package headers

import "time"

// hintPhrases introduce a wait in vendor error messages, lower case.
var hintPhrases = [...]string{"try again in", "try again after", "retry in", "retry after"}

// RetryHint extracts a wait from a vendor's error message, for vendors that put it in the
// text rather than a header:
//
//	"Please try again in 634ms"          (OpenAI)
//	"try again in 1.5s", "try again in 6m0s"
//	"Please retry in 10.68s."            (Gemini)
//	"Please retry after 37 seconds."     (Azure OpenAI)
//	"retry after 20 seconds", "try again in 2 minutes"
//
// Phrases are matched ignoring ASCII case; the wait is a Go-style duration or a number
// followed by a unit word (ms, millisecond(s), s, sec(s), second(s), min(s), minute(s),
// h, hr(s), hour(s)). The first phrase occurrence that is followed by a wait wins.
// It reports false when the message has no such hint.
func RetryHint(msg string) (time.Duration, bool) {
	best, bestAt := time.Duration(0), -1
	for _, p := range hintPhrases {
		for from := 0; ; {
			i := indexFold(msg, p, from)
			if i < 0 || (bestAt >= 0 && i > bestAt) {
				break
			}
			if d, ok := scanWait(msg[i+len(p):]); ok {
				best, bestAt = d, i
				break
			}
			from = i + 1
		}
	}
	return best, bestAt >= 0
}

// scanWait reads the wait after a hint phrase: blanks, then a Go-style duration or a number
// and a unit word.
func scanWait(s string) (time.Duration, bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	s = s[i:]
	if d, n, ok := scanGoDuration(s); ok && (n == len(s) || !isLetter(s[n])) {
		return d, true
	}
	// A number, optional blanks, a unit word.
	j := 0
	for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
		j++
	}
	num := s[:j]
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	k := j
	for k < len(s) && isLetter(s[k]) {
		k++
	}
	unit, ok := wordUnit(s[j:k])
	if !ok || num == "" {
		return 0, false
	}
	d, n, ok := scanDecimal(num, unit)
	if !ok || n != len(num) {
		return 0, false
	}
	return d, true
}

// wordUnit maps a unit word, in any ASCII case, to its duration.
func wordUnit(w string) (time.Duration, bool) {
	for _, u := range unitWords {
		for _, name := range u.names {
			if equalFold(w, name) {
				return u.unit, true
			}
		}
	}
	return 0, false
}

var unitWords = [...]struct {
	unit  time.Duration
	names []string
}{
	{time.Millisecond, []string{"ms", "msec", "msecs", "millisecond", "milliseconds"}},
	{time.Second, []string{"s", "sec", "secs", "second", "seconds"}},
	{time.Minute, []string{"m", "min", "mins", "minute", "minutes"}},
	{time.Hour, []string{"h", "hr", "hrs", "hour", "hours"}},
}

func isLetter(c byte) bool { c = lower(c); return 'a' <= c && c <= 'z' }
