package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/jsonx"
)

var _ llmclient.Embedder = (*Provider)(nil)

// The embedding batch sizes.
const (
	// MaxEmbeddingInputs is the most inputs one /embeddings request takes
	// (CreateEmbeddingRequest.input.maxItems).
	MaxEmbeddingInputs = 2048
	// DefaultMaxEmbedBatch is MaxEmbedBatch without WithMaxEmbedBatch: 256 inputs keep the
	// largest response (3072-dimension vectors as JSON numbers, about 10 MB) well below the
	// 32 MiB response limit.
	DefaultMaxEmbedBatch = 256
)

// WithMaxEmbedBatch sets the most inputs one Embed call sends (MaxEmbedBatch), from 1 to
// MaxEmbeddingInputs. Default DefaultMaxEmbedBatch. Lower it for servers with smaller
// limits or models with larger vectors.
func WithMaxEmbedBatch(n int) Option {
	return optionFunc(func(c *config) { c.maxEmbedBatch = n })
}

// MaxEmbedBatch returns the most inputs one Embed call takes; the Client splits larger
// requests.
func (p *Provider) MaxEmbedBatch() int { return p.maxEmbedBatch }

// embedBody is CreateEmbeddingRequest.
type embedBody struct {
	Model      string   `json:"model,omitempty"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

// embedResponse is CreateEmbeddingResponse, with an in-band error.
type embedResponse struct {
	Model string `json:"model"`
	Data  []struct {
		Index int `json:"index"`
		// Embedding is an array of numbers, or a base64 string of little-endian float32s
		// (encoding_format "base64", which Extra may ask for).
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage *struct { // counts read as ccUsage's
		PromptTokens jsonx.Count `json:"prompt_tokens"`
		TotalTokens  jsonx.Count `json:"total_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Embed makes one POST /embeddings call (on Azure, the model's deployment's) for every
// input of call.Request, at most MaxEmbedBatch of them. EmbedRequest.Dimensions is sent
// as dimensions, TaskType is ignored, Extra is merged into the body, call.Headers are
// added to the request; the x-ratelimit-* headers are read into RateLimits. An empty input list,
// an empty input text (the API rejects both), more inputs than MaxEmbedBatch or negative
// Dimensions are refused as bad requests before any call. Errors are classified as for
// Complete; a 2xx body that is not one vector per input is a failure.ServerError error.
func (p *Provider) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	if call == nil || call.Request == nil {
		return nil, badRequest("openai: embed call or request is nil")
	}
	req := call.Request
	model := call.Model
	if model == "" {
		model = req.Model
	}
	switch {
	case p.azure && model == "":
		return nil, badRequest("openai: Azure needs a deployment name: the call's model is empty")
	case len(req.Input) == 0:
		return nil, badRequest("openai: embed request has no input")
	case len(req.Input) > p.maxEmbedBatch:
		return nil, badRequest("openai: embed request has " + strconv.Itoa(len(req.Input)) + " inputs, more than MaxEmbedBatch " + strconv.Itoa(p.maxEmbedBatch))
	case req.Dimensions < 0:
		return nil, badRequest("openai: embed Dimensions is negative")
	}
	for i, s := range req.Input {
		if s == "" {
			return nil, badRequest("openai: embed input " + strconv.Itoa(i) + " is empty")
		}
	}
	body, err := marshal(&embedBody{Model: model, Input: req.Input, Dimensions: req.Dimensions})
	if err != nil {
		return nil, badRequest("openai: encoding embed request: " + err.Error())
	}
	if len(req.Extra) > 0 {
		if body, err = mergeExtra(body, req.Extra); err != nil {
			return nil, badRequest(err.Error())
		}
	}
	key := p.key(call.APIKey)
	resp, err := p.post(ctx, p.url("embeddings", model), body, model, key, false, call.Headers)
	if err != nil {
		return nil, err
	}
	defer httpx.DrainClose(resp.Body)
	data, err := p.sender.ReadBody(resp, requestID(resp.Header), model)
	if err != nil {
		return nil, err
	}
	out, e := parseEmbeddings(resp.StatusCode, resp.Header, data, len(req.Input), time.Now())
	if e != nil {
		e.Model = model
		e.Redact(key)
		return nil, e
	}
	out.RateLimits = ParseRateLimits(resp.Header, time.Now())
	return out, nil
}

// parseEmbeddings decodes a 2xx /embeddings body that must hold n vectors of one length.
func parseEmbeddings(status int, h http.Header, body []byte, n int, now time.Time) (*llmclient.EmbedResponse, *llmclient.Error) {
	var r embedResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed(status, h, body, now, "malformed JSON: "+err.Error())
	}
	if len(r.Error) > 0 && !bytes.Equal(r.Error, []byte("null")) && len(r.Data) == 0 {
		return nil, errorFromBodyAt(status, h, body, now)
	}
	if len(r.Data) != n {
		return nil, malformed(status, h, nil, now, "embeddings response has "+strconv.Itoa(len(r.Data))+" vectors for "+strconv.Itoa(n)+" inputs")
	}
	out := &llmclient.EmbedResponse{Model: r.Model, Vectors: make([][]float32, n)}
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n || out.Vectors[d.Index] != nil {
			return nil, malformed(status, h, nil, now, "embeddings response has a missing or repeated index "+strconv.Itoa(d.Index))
		}
		v, err := decodeVector(d.Embedding)
		if err != nil {
			return nil, malformed(status, h, nil, now, "embedding "+strconv.Itoa(d.Index)+": "+err.Error())
		}
		out.Vectors[d.Index] = v
	}
	for _, v := range out.Vectors {
		if len(v) != len(out.Vectors[0]) {
			return nil, malformed(status, h, nil, now, "embeddings response mixes vector lengths")
		}
	}
	if u := r.Usage; u != nil {
		out.Usage = llmclient.Usage{InputTokens: int(u.PromptTokens), TotalTokens: int(u.TotalTokens)}
		if out.Usage.TotalTokens == 0 {
			out.Usage.TotalTokens = int(u.PromptTokens)
		}
	}
	return out, nil
}

// decodeVector reads an embedding: a JSON array of numbers, or a base64 string of
// little-endian float32 values. It must not be empty.
func decodeVector(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 || len(b)%4 != 0 {
			return nil, errors.New("base64 embedding is not a list of float32 values")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, errors.New("embedding is not a list of numbers")
	}
	if len(v) == 0 {
		return nil, errors.New("embedding is empty")
	}
	return v, nil
}
