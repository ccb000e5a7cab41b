package httpx

import (
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxErrorBody is the most an adapter reads of an error response body: 1 MiB.
const MaxErrorBody = 1 << 20

// maxDrain is the most DrainClose reads before closing, so a connection can be reused
// without paying for a large unread body.
const maxDrain = 64 << 10

// ErrTooLarge is returned (wrapped) by ReadLimited when a body exceeds its limit.
var ErrTooLarge = errors.New("httpx: body too large")

// ReadLimited reads r to its end, reading at most max+1 bytes. When r holds more than max
// bytes it returns the first max bytes and an error wrapping ErrTooLarge, so callers can
// still show the start of the body. A read error is returned with what was read before it.
func ReadLimited(r io.Reader, max int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	if max == math.MaxInt64 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return b[:max], &tooLargeError{max: max}
	}
	return b, nil
}

type tooLargeError struct{ max int64 }

func (e *tooLargeError) Error() string {
	return "httpx: body larger than " + strconv.FormatInt(e.max, 10) + " bytes"
}

func (e *tooLargeError) Unwrap() error { return ErrTooLarge }

// DrainClose reads and discards at most 64 KiB of rc, then closes it, so that a small unread
// remainder does not prevent the connection from being reused. A nil rc is ignored.
func DrainClose(rc io.ReadCloser) {
	if rc == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, maxDrain))
	_ = rc.Close()
}

// Snippet returns the start of an error body fit for an error message: at most n bytes,
// cut at a UTF-8 boundary, invalid UTF-8 and control characters replaced by spaces, runs
// of blanks collapsed and ends trimmed. It returns "" for a blank body.
func Snippet(body []byte, n int) string {
	var b strings.Builder
	b.Grow(min(len(body), n))
	space := true // drop leading blanks
	for i := 0; i < len(body) && b.Len() < n; {
		r, size := utf8.DecodeRune(body[i:])
		i += size
		if r < 0x20 || r == 0x7f || r == ' ' || r == '\uFFFD' || (r >= 0x80 && r < 0xa0) {
			if !space {
				b.WriteByte(' ')
				space = true
			}
			continue
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
		space = false
	}
	return strings.TrimRight(b.String(), " ")
}
