package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	llmopenai "github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/provider/openai/openaitest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// memoryTransport answers every request with the same event stream, from memory.
type memoryTransport struct{ body []byte }

func (m memoryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(m.body)),
		Request: r,
	}, nil
}

// decodeLLMClient reads the stream through provider/openai's decoder.
func decodeLLMClient(ctx context.Context, p *llmopenai.Provider, call *llmclient.Call) (int, error) {
	s, err := p.Stream(ctx, call)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	text := 0
	for {
		c, err := s.Recv()
		if err == io.EOF {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		text += len(c.Text)
	}
}

// decodeOpenAIGo reads the stream through openai-go's own streaming decoder.
func decodeOpenAIGo(ctx context.Context, c openai.Client, params openai.ChatCompletionNewParams) (int, error) {
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	text := 0
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) > 0 {
			text += len(ch.Choices[0].Delta.Content)
		}
	}
	return text, s.Err()
}

// baselineChunk is the baseline's view of a chunk.
type baselineChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// decodeBaseline is what one writes first: bufio.Scanner over lines, encoding/json per chunk.
func decodeBaseline(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	text := 0
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		data := line[len("data: "):]
		if bytes.Equal(data, []byte("[DONE]")) {
			return text, nil
		}
		var c baselineChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return text, err
		}
		if len(c.Choices) > 0 {
			text += len(c.Choices[0].Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return text, err
	}
	return text, errors.New("no [DONE]")
}

// BenchmarkStreamDecode decodes the same 20,000-chunk OpenAI stream, held in memory, with
// llmclient's decoder, a bufio.Scanner + encoding/json baseline and openai-go's decoder.
func BenchmarkStreamDecode(b *testing.B) {
	const n = 20_000
	in := openaitest.ChatStream(n)
	ctx := context.Background()
	hc := &http.Client{Transport: memoryTransport{body: in}}
	p, err := llmopenai.New(llmopenai.WithBaseURL("http://127.0.0.1:1/v1"), llmopenai.WithHTTPClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	call := &llmclient.Call{Model: "gpt-4o", Request: &llmclient.Request{Model: "gpt-4o",
		Messages: []llmclient.Message{llmclient.UserMessage("hi")}}}
	oc := openai.NewClient(option.WithBaseURL("http://127.0.0.1:1/v1"), option.WithAPIKey("sk-bench"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	want, err := decodeBaseline(bytes.NewReader(in))
	if err != nil {
		b.Fatal(err)
	}
	decoders := []struct {
		name   string
		decode func() (int, error)
	}{
		{"llmclient", func() (int, error) { return decodeLLMClient(ctx, p, call) }},
		{"baseline-bufio-encodingjson", func() (int, error) { return decodeBaseline(bytes.NewReader(in)) }},
		{"openai-go", func() (int, error) { return decodeOpenAIGo(ctx, oc, params) }},
	}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			if got, err := d.decode(); err != nil || got != want {
				b.Fatalf("decoded %d bytes of text (%v), want %d", got, err, want)
			}
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if _, err := d.decode(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/event")
		})
	}
}

// BenchmarkStreamClient reads the same 20,000-chunk stream through Client.Stream, every
// layer on (limits, breaker, idle timeout, accumulation or not), next to the adapter's own
// decoding: what the committed attempt costs per event.
func BenchmarkStreamClient(b *testing.B) {
	const n = 20_000
	in := openaitest.ChatStream(n)
	ctx := context.Background()
	hc := &http.Client{Transport: memoryTransport{body: in}}
	p, err := llmopenai.New(llmopenai.WithBaseURL("http://127.0.0.1:1/v1"), llmopenai.WithHTTPClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
	call := &llmclient.Call{Model: "gpt-4o", Request: req}
	client := func(keep bool) *llmclient.Client {
		c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Keys: []string{"k1"},
			Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20}}),
			llmclient.WithStreamAccumulate(keep))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	readClient := func(c *llmclient.Client) (int, error) {
		text, _, err := streamText(ctx, c, req)
		return text, err
	}
	keep, lean := client(true), client(false)
	for _, d := range []struct {
		name string
		read func() (int, error)
	}{
		{"adapter", func() (int, error) { return decodeLLMClient(ctx, p, call) }},
		{"client", func() (int, error) { return readClient(keep) }},
		{"client-no-accumulate", func() (int, error) { return readClient(lean) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// cutAfter returns the first k data events of an event stream (its role chunk counts as
// one): a body that ends there, without its finish reason or [DONE], as a dropped
// connection leaves it.
func cutAfter(in []byte, k int) []byte {
	at := 0
	for range k {
		i := bytes.Index(in[at:], []byte("\n\n"))
		if i < 0 {
			return in
		}
		at += i + 2
	}
	return in[:at]
}

// BenchmarkStreamContinued reads a 200-chunk stream through Client.Stream whole
// ("uncut"), and cut after half its chunks and continued on a second upstream that
// answers the same stream again ("cut-continued": the request restarted, the fallback's
// first 100 chunks matched against what the caller has and skipped). Both upstreams answer
// from memory, so the difference is the continuation's own cost: the second attempt's
// admission and commit, and decoding the chunks the restart repeats. A real continuation
// adds the fallback's time to first token and the time it takes to generate again what
// the caller already has.
func BenchmarkStreamContinued(b *testing.B) {
	const n, k = 200, 100
	in := openaitest.ChatStream(n)
	ctx := context.Background()
	provider := func(body []byte) *llmopenai.Provider {
		p, err := llmopenai.New(llmopenai.WithBaseURL("http://127.0.0.1:1/v1"),
			llmopenai.WithHTTPClient(&http.Client{Transport: memoryTransport{body: body}}))
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	limits := llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20}
	client := func(primary []byte) *llmclient.Client {
		c, err := llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: provider(primary), Keys: []string{"k1"}, Limits: limits}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "fallback", Provider: provider(in), Keys: []string{"k2"}, Limits: limits}),
			// A continuation every time is no reason to open the primary's breaker here.
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1 << 30, MinRequests: 1 << 30}))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
	read := func(c *llmclient.Client, attempts int) (int, error) {
		text, got, err := streamText(ctx, c, req)
		if err == nil && got != attempts {
			err = fmt.Errorf("%d attempts, want %d", got, attempts)
		}
		return text, err
	}
	want, err := decodeBaseline(bytes.NewReader(in))
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name     string
		c        *llmclient.Client
		attempts int
	}{
		{"uncut", client(in), 1},
		{"cut-continued", client(cutAfter(in, 1+k)), 2},
	} {
		b.Run(d.name, func(b *testing.B) {
			if got, err := read(d.c, d.attempts); err != nil || got != want {
				b.Fatalf("read %d bytes of text (%v), want %d", got, err, want)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := read(d.c, d.attempts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// streamText reads one stream of req through c and returns the bytes of text it
// delivered and, when it ended cleanly, the number of attempts its Response shows.
func streamText(ctx context.Context, c *llmclient.Client, req *llmclient.Request) (text, attempts int, err error) {
	s, err := c.Stream(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	for s.Next() {
		text += len(s.Current().Text)
	}
	if err := s.Err(); err != nil {
		return text, 0, err
	}
	if r := s.Response(); r != nil {
		attempts = len(r.Attempts)
	}
	return text, attempts, nil
}
