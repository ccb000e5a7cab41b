// Package sse decodes a text/event-stream body as the WHATWG HTML "server-sent events"
// specification describes it (section 9.2.6, "Interpreting an event stream").
//
// The decoder follows the specification's parsing rules: a UTF-8 byte order mark at the
// start of the stream is skipped; lines end with LF, CRLF or a lone CR (a CR at the end of
// one read followed by an LF at the start of the next is one line ending); a line is a
// field "name: value" with at most one space after the colon removed, a line without a
// colon is a field with an empty value, a line that starts with a colon is a comment; the
// "data" lines of one event are joined with "\n"; "event" sets the event type, "id" the last
// event ID (ignored when the value contains NUL; it persists across events), "retry" the
// reconnection time (only when the value is all ASCII digits); other fields are ignored; a
// blank line dispatches the event, unless it has no data line, in which case the pending
// event type is reset and nothing is dispatched.
//
// Deliberate deviations, both made because LLM vendors rely on them:
//
//   - Comments are returned as events (Event.Comment) instead of being dropped, so that the
//     caller can see keep-alives such as ": keep-alive" or ": ping".
//   - At the end of the stream, an event that has at least one data line but was not
//     followed by a blank line is dispatched instead of discarded, and an unterminated last
//     line is processed as a line. Some vendors (Gemini) end their streams without the final
//     blank line; losing the last chunk would be worse than the non-conformance.
//
// Memory is bounded by the size limit given to NewDecoder: no single line and no event's
// accumulated data may exceed it, and the decoder's buffers never grow much beyond it.
package sse
