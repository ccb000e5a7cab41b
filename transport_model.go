package llmclient

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// An upstream may know a model under its own name (Upstream.Models): a request the SDK
// addressed to a model group, or to a name an upstream maps, goes out to each upstream
// under that upstream's name. The transport rewrites only the model: the top-level
// "model" member of a JSON body (OpenAI, Anthropic) or the model segment of the path
// (Gemini's /models/{model}:{method}); every other byte is sent as the caller wrote it.

// renameModel returns body with the string value of its top-level "model" members set to
// to, and whether it found one. A body that is not a JSON object is returned unchanged.
func renameModel(body []byte, to string) ([]byte, bool) {
	spans := modelSpans(body)
	if len(spans) == 0 {
		return body, false
	}
	name, err := json.Marshal(to)
	if err != nil {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(spans)*len(name))
	prev := 0
	for _, s := range spans {
		out = append(out, body[prev:s[0]]...)
		out = append(out, name...)
		prev = s[1]
	}
	return append(out, body[prev:]...), true
}

// modelSpans returns the byte ranges of the string values of body's top-level "model"
// members (quotes included); nil when body is not a JSON object or has none.
func modelSpans(body []byte) [][2]int {
	i := skipJSONSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil
	}
	i++
	var spans [][2]int
	for {
		i = skipJSONSpace(body, i)
		if i >= len(body) {
			return nil
		}
		if body[i] == '}' {
			return spans
		}
		if body[i] == ',' {
			i++
			continue
		}
		if body[i] != '"' {
			return nil
		}
		end := jsonStringEnd(body, i)
		if end < 0 {
			return nil
		}
		isModel := string(body[i:end]) == `"model"`
		i = skipJSONSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return nil
		}
		i = skipJSONSpace(body, i+1)
		vend := jsonValueEnd(body, i)
		if vend < 0 {
			return nil
		}
		if isModel && body[i] == '"' {
			spans = append(spans, [2]int{i, vend})
		}
		i = vend
	}
}

// jsonStringEnd returns the index just past the JSON string starting at body[i] (a
// quote), or -1 when it does not end.
func jsonStringEnd(body []byte, i int) int {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// jsonValueEnd returns the index just past the JSON value starting at body[i], or -1 when
// it does not end. Nested values are skipped by bracket depth, strings by their quotes.
func jsonValueEnd(body []byte, i int) int {
	if i >= len(body) {
		return -1
	}
	switch body[i] {
	case '"':
		return jsonStringEnd(body, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(body); j++ {
			switch body[j] {
			case '"':
				e := jsonStringEnd(body, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(body) && body[j] != ',' && body[j] != '}' && body[j] != ']' && body[j] != ' ' &&
		body[j] != '\t' && body[j] != '\n' && body[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// renamePath returns a copy of u with the model segment of its path naming to instead of
// from, and whether it had one: Gemini's (the last "/models/{from}:" segment) or an Azure
// OpenAI deployment's (the last "/deployments/{from}/" segment).
func renamePath(u *url.URL, from, to string) (*url.URL, bool) {
	for _, sep := range [...][2]string{{"/models/", ":"}, {"/deployments/", "/"}} {
		seg := sep[0] + from + sep[1]
		if i := strings.LastIndex(u.Path, seg); i >= 0 {
			out := *u
			out.Path = u.Path[:i] + sep[0] + to + sep[1] + u.Path[i+len(seg):]
			out.RawPath = ""
			return &out, true
		}
	}
	return u, false
}

// renameAttempt sets the model of an attempt's outgoing request to model, the attempt's
// upstream's name for the caller's: in the body when it names one, and in the path when
// the path names the caller's (Gemini's model, Azure's deployment, which Azure routes by
// whatever the body says). A body too large to buffer goes out as it is.
func renameAttempt(out *http.Request, x *txCall, model string) {
	if x.body.buf != nil {
		if data, ok := renameModel(x.body.buf, model); ok {
			out.Body, out.ContentLength = newBufferedBody(data), int64(len(data))
			out.GetBody = func() (io.ReadCloser, error) { return newBufferedBody(data), nil }
		}
	}
	out.URL, _ = renamePath(out.URL, x.call.Request.Model, model)
}
