package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultMaxEventSize is the size limit NewDecoder uses when given a limit <= 0: 4 MiB.
// It bounds one line and the joined data of one event. The largest legitimate LLM stream
// events (a whole tool-call argument or an image in one chunk) stay well below it.
const DefaultMaxEventSize = 4 << 20

// ErrEventTooLarge is returned (wrapped, match it with errors.Is) when a line or the data of
// one event exceeds the decoder's size limit. The decoder is unusable afterwards.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// readBufSize is the decoder's initial read buffer; it grows only for lines longer than it.
// Streamed chunks are a few hundred bytes and net/http hands a body over in reads of at
// most 4 KiB, so a larger first buffer only costs each stream an allocation to clear.
const readBufSize = 4 << 10

// maxEmptyReads is how many (0, nil) reads in a row the decoder tolerates before failing
// with io.ErrNoProgress, like bufio.
const maxEmptyReads = 100

// Event is one dispatched event or one comment line.
type Event struct {
	// Type is the "event" field; "" means the default type "message". Common type names are
	// interned, so they do not allocate.
	Type string
	// Data holds the event's data lines joined with "\n". It is valid only until the next
	// call to Next: it points into a buffer the decoder reuses.
	Data []byte
	// ID is the last event ID: it persists from the last "id" field until another one
	// changes it, as the specification requires. It is "" for comments.
	ID string
	// Retry is the reconnection time from a "retry" field seen since the previous dispatched
	// event, else 0. (A "retry" field usually comes in an event of its own, which has no
	// data and is therefore not dispatched; its value is reported with the next event.)
	Retry time.Duration
	// Comment is true for a comment line (": keep-alive"). Data then holds the comment text
	// without the colon and one leading space; the other fields are empty.
	Comment bool
	// Raw is true for a bare JSON value outside any field, returned only by a decoder on
	// which AcceptRawJSON was called. Data then holds the JSON text (its lines joined with
	// "\n"); Type, ID and Retry are empty.
	Raw bool
}

// Decoder reads events from a text/event-stream. The zero value is not usable; create one
// with NewDecoder. A Decoder is not safe for concurrent use.
type Decoder struct {
	r   io.Reader
	max int

	buf        []byte // read buffer; the unread bytes are buf[start:end]
	start, end int
	scanned    int   // buf[start:start+scanned] is known to hold no line ending
	readErr    error // error from r, returned once the buffered bytes are used up
	started    bool  // the byte order mark check is done
	skipLF     bool  // the previous line ended with CR: an LF right after it is part of that ending
	emptyReads int

	data     []byte // pending event's data
	hasData  bool   // a data field was seen (data may still be empty)
	typ      string // pending event type
	lastType string // last interned type, reused when the next one is equal
	lastID   string
	retry    time.Duration
	rawJSON  bool // AcceptRawJSON was called

	err error // sticky error: io.EOF after the end, or the failure
}

// NewDecoder returns a Decoder reading from r. maxEventSize bounds any single line and the
// joined data of one event; maxEventSize <= 0 means DefaultMaxEventSize. The decoder's
// memory stays within a small multiple of the limit.
func NewDecoder(r io.Reader, maxEventSize int) *Decoder {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Decoder{r: r, max: maxEventSize}
}

// AcceptRawJSON makes the decoder return a bare JSON value — a line that starts with '{'
// or '[' where an event's first field would be — as one Event with Raw set, instead of
// ignoring it as a field with an unknown name as the specification says. Gemini sends an
// error that way inside an event stream, possibly over several lines. The value ends where
// its brackets balance (outside strings), or at the end of the stream; it is bounded by
// the decoder's size limit like an event's data. Call it before the first Next.
func (d *Decoder) AcceptRawJSON() { d.rawJSON = true }

// Next returns the next event or comment. It returns io.EOF at the end of the stream (after
// dispatching a final event that has data but no blank line after it, see the package
// documentation), an error wrapping ErrEventTooLarge when a line or an event is over the
// limit, and otherwise the reader's error. After an error, every call returns it again.
func (d *Decoder) Next() (Event, error) {
	if d.err != nil {
		return Event{}, d.err
	}
	for {
		line, err := d.readLine()
		if err != nil {
			if err == io.EOF && d.hasData {
				d.err = io.EOF
				return d.dispatch(), nil
			}
			d.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if !d.hasData {
				d.typ = ""
				continue
			}
			return d.dispatch(), nil
		}
		if line[0] == ':' {
			text := line[1:]
			if len(text) > 0 && text[0] == ' ' {
				text = text[1:]
			}
			return Event{Data: text, Comment: true}, nil
		}
		if d.rawJSON && !d.hasData && (line[0] == '{' || line[0] == '[') {
			return d.raw(line)
		}
		if err := d.field(line); err != nil {
			d.err = err
			return Event{}, err
		}
	}
}

// raw reads the bare JSON value that starts with line (see AcceptRawJSON).
func (d *Decoder) raw(line []byte) (Event, error) {
	d.data = d.data[:0]
	d.typ = ""
	var depth jsonDepth
	for {
		n := len(d.data) + len(line)
		if len(d.data) > 0 {
			n++
		}
		if n > d.max {
			d.err = fmt.Errorf("%w: JSON value exceeds %d bytes", ErrEventTooLarge, d.max)
			return Event{}, d.err
		}
		if n > cap(d.data) {
			d.grow(n)
		}
		if len(d.data) > 0 {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, line...)
		if depth.feed(line) {
			break
		}
		var err error
		if line, err = d.readLine(); err != nil {
			if err != io.EOF {
				d.err = err
				return Event{}, err
			}
			d.err = io.EOF // the value is cut short: the caller sees what came
			break
		}
	}
	ev := Event{Data: d.data, Raw: true}
	d.data = d.data[:0]
	return ev, nil
}

// jsonDepth follows the nesting of a JSON text fed line by line, outside strings.
type jsonDepth struct {
	depth    int
	inString bool
	escaped  bool
}

// feed reads b and reports whether the outermost value closed in it.
func (j *jsonDepth) feed(b []byte) bool {
	for _, c := range b {
		switch {
		case j.escaped:
			j.escaped = false
		case j.inString && c == '\\':
			j.escaped = true
		case c == '"':
			j.inString = !j.inString
		case j.inString:
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			if j.depth <= 0 {
				return true
			}
		}
	}
	return false
}

// dispatch returns the pending event and resets the pending state. The returned Data
// aliases d.data, which the next event overwrites.
func (d *Decoder) dispatch() Event {
	ev := Event{Type: d.typ, Data: d.data, ID: d.lastID, Retry: d.retry}
	d.data = d.data[:0]
	d.hasData = false
	d.typ = ""
	d.retry = 0
	return ev
}

// field processes one non-empty, non-comment line.
func (d *Decoder) field(line []byte) error {
	name, value := line, line[len(line):]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(d.data) + len(value)
		if d.hasData {
			n++
		}
		if n > d.max {
			return fmt.Errorf("%w: event data exceeds %d bytes", ErrEventTooLarge, d.max)
		}
		if n > cap(d.data) {
			d.grow(n)
		}
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.typ = d.internType(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != d.lastID {
			d.lastID = string(value)
		}
	case "retry":
		if ms, ok := parseMillis(value); ok {
			d.retry = ms
		}
	}
	return nil
}

// grow makes room for n bytes of data, doubling the buffer but never past the limit, so
// that a large event allocates about twice the limit in all (append's gentler growth for
// large slices would allocate several times more).
func (d *Decoder) grow(n int) {
	size := max(n, 2*cap(d.data), 512)
	size = min(size, d.max)
	nb := make([]byte, len(d.data), size)
	copy(nb, d.data)
	d.data = nb
}

// parseMillis parses a retry value: one or more ASCII digits, milliseconds. Values too large
// for a time.Duration are rejected.
func parseMillis(b []byte) (time.Duration, bool) {
	if len(b) == 0 {
		return 0, false
	}
	const limit = int64(1<<63-1) / int64(time.Millisecond)
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > limit {
			return 0, false
		}
	}
	return time.Duration(n) * time.Millisecond, true
}

// internType returns b as a string without allocating when it is a common event type or
// equal to the previous type.
func (d *Decoder) internType(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == d.lastType {
		return d.lastType
	}
	var s string
	switch string(b) {
	case "message":
		s = "message"
	case "error":
		s = "error"
	case "ping":
		s = "ping"
	case "done":
		s = "done"
	case "message_start":
		s = "message_start"
	case "message_delta":
		s = "message_delta"
	case "message_stop":
		s = "message_stop"
	case "content_block_start":
		s = "content_block_start"
	case "content_block_delta":
		s = "content_block_delta"
	case "content_block_stop":
		s = "content_block_stop"
	case "response.created":
		s = "response.created"
	case "response.in_progress":
		s = "response.in_progress"
	case "response.output_text.delta":
		s = "response.output_text.delta"
	case "response.completed":
		s = "response.completed"
	case "response.failed":
		s = "response.failed"
	default:
		s = string(b)
	}
	d.lastType = s
	return s
}

// readLine returns the next line without its line ending. The line points into the read
// buffer and is valid until the next read. At the end of the stream an unterminated last
// line is returned as a line, then io.EOF.
func (d *Decoder) readLine() ([]byte, error) {
	if !d.started {
		if err := d.skipBOM(); err != nil {
			return nil, err
		}
	}
	for {
		if d.skipLF && d.start < d.end {
			if d.buf[d.start] == '\n' {
				d.start++
			}
			d.skipLF = false
		}
		if i := indexEOL(d.buf[d.start+d.scanned : d.end]); i >= 0 {
			n := d.scanned + i
			line := d.buf[d.start : d.start+n]
			d.skipLF = d.buf[d.start+n] == '\r'
			d.start += n + 1
			d.scanned = 0
			if n > d.max {
				return nil, d.lineTooLarge()
			}
			return line, nil
		}
		d.scanned = d.end - d.start
		if d.scanned > d.max {
			return nil, d.lineTooLarge()
		}
		if d.readErr != nil {
			if d.readErr == io.EOF && d.start < d.end {
				line := d.buf[d.start:d.end]
				d.start, d.scanned = d.end, 0
				return line, nil
			}
			return nil, d.readErr
		}
		d.fill()
	}
}

func (d *Decoder) lineTooLarge() error {
	return fmt.Errorf("%w: line exceeds %d bytes", ErrEventTooLarge, d.max)
}

// skipBOM reads until three bytes are buffered (or the stream ends) and skips a leading
// UTF-8 byte order mark.
func (d *Decoder) skipBOM() error {
	for d.end-d.start < 3 && d.readErr == nil {
		d.fill()
	}
	d.started = true
	if bytes.HasPrefix(d.buf[d.start:d.end], []byte("\xEF\xBB\xBF")) {
		d.start += 3
	}
	return nil
}

// fill reads more bytes into the buffer, making room first by moving the unread bytes to
// the front when little room is left behind them or, when a single line fills the whole
// buffer, by growing it up to the limit.
func (d *Decoder) fill() {
	if d.buf == nil {
		d.buf = make([]byte, readBufSize)
	}
	if d.start == d.end {
		d.start, d.end = 0, 0
	} else if d.start > 0 && len(d.buf)-d.end < len(d.buf)/4 {
		// Little room left behind the unread bytes (usually a partial line): move them.
		d.end = copy(d.buf, d.buf[d.start:d.end])
		d.start = 0
	}
	if d.end == len(d.buf) {
		// One unterminated line fills the buffer, and it is not over the limit yet
		// (readLine checked), so len(d.buf) <= d.max.
		// Jump straight to the limit once doubling would reach it, so the last step does not
		// allocate the limit twice (2^k, then 2^k+1).
		size := 2 * len(d.buf)
		if size >= d.max {
			size = d.max + 1
		}
		nb := make([]byte, size)
		copy(nb, d.buf[:d.end])
		d.buf = nb
	}
	n, err := d.r.Read(d.buf[d.end:])
	if n < 0 || n > len(d.buf)-d.end {
		d.readErr = errors.New("sse: reader returned an invalid count")
		return
	}
	d.end += n
	switch {
	case err != nil:
		d.readErr = err
	case n == 0:
		d.emptyReads++
		if d.emptyReads >= maxEmptyReads {
			d.readErr = io.ErrNoProgress
		}
	default:
		d.emptyReads = 0
	}
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
