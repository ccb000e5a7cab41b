package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/jsonx"
)

var _ llmclient.Embedder = (*Provider)(nil)

// DefaultMaxEmbedBatch is MaxEmbedBatch without WithMaxEmbedBatch: the number of requests
// batchEmbedContents takes in one call.
const DefaultMaxEmbedBatch = 100

// maxEmbedBatchLimit bounds WithMaxEmbedBatch.
const maxEmbedBatchLimit = 1000

// WithMaxEmbedBatch sets the most inputs one Embed call sends (MaxEmbedBatch), from 1 to
// 1000. Default DefaultMaxEmbedBatch.
func WithMaxEmbedBatch(n int) Option {
	return optionFunc(func(c *config) { c.maxEmbedBatch, c.maxEmbedBatchSet = n, true })
}

// MaxEmbedBatch returns the most inputs one Embed call takes; the Client splits larger
// requests.
func (p *Provider) MaxEmbedBatch() int { return p.maxEmbedBatch }

// wireEmbedRequest is EmbedContentRequest. taskType and outputDimensionality are sent at
// the top level, which every model version reads (the spec also offers them in
// embedContentConfig).
type wireEmbedRequest struct {
	Model                string      `json:"model"`
	Content              wireContent `json:"content"`
	TaskType             string      `json:"taskType,omitempty"`
	OutputDimensionality int         `json:"outputDimensionality,omitempty"`
}

type wireEmbedding struct {
	Values []float32 `json:"values"`
}

// wireEmbedResponse is EmbedContentResponse or BatchEmbedContentsResponse.
type wireEmbedResponse struct {
	Embedding     *wireEmbedding  `json:"embedding"`
	Embeddings    []wireEmbedding `json:"embeddings"`
	UsageMetadata *struct {
		PromptTokenCount jsonx.Count `json:"promptTokenCount"` // read as wireUsage's
	} `json:"usageMetadata"`
	Error *wireStatus `json:"error"`
}

// Embed embeds the inputs of call.Request, at most MaxEmbedBatch of them: one input with
// models/{model}:embedContent, several with :batchEmbedContents (one request per input,
// in order). EmbedRequest.Dimensions is sent as outputDimensionality and TaskType as
// taskType; Extra is merged into the top level of the body; call.Headers are added to the
// request. Usage is the
// usageMetadata.promptTokenCount when Gemini reports it. An empty input list or text,
// more inputs than MaxEmbedBatch or negative Dimensions are refused as bad requests
// before any call; with WithVertex, Embed is refused with an error wrapping
// llmclient.ErrUnsupported (Vertex AI embeds with :predict, which this adapter does not
// speak). Errors are classified as for Complete; a 2xx body that is not one vector per
// input is a failure.ServerError error.
func (p *Provider) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	if call == nil || call.Request == nil {
		return nil, adapter.BadRequest(errors.New("gemini: nil embed call or request"))
	}
	req := call.Request
	model := strings.TrimPrefix(call.Model, "models/")
	if model == "" {
		model = strings.TrimPrefix(req.Model, "models/")
	}
	if p.vertex {
		return nil, adapter.Unsupported("gemini", model, "embeddings on Vertex AI (its :predict endpoint is not supported)")
	}
	key := call.APIKey
	if key == "" {
		key = p.apiKey
	}
	if e := adapter.CheckCall("gemini", &llmclient.Call{Model: model, Request: &llmclient.Request{}}, key, errNoKey); e != nil {
		return nil, e
	}
	body, err := p.embedBody(req, model)
	if err != nil {
		e := adapter.BadRequest(err)
		e.Model = model
		return nil, e
	}
	op := ":batchEmbedContents"
	if len(req.Input) == 1 {
		op = ":embedContent"
	}
	resp, err := p.post(ctx, &llmclient.Call{Model: model, Headers: call.Headers}, p.prefix+url.PathEscape(model)+op, key, body, false)
	if err != nil {
		return nil, err
	}
	defer httpx.DrainClose(resp.Body)
	data, err := p.sender.ReadBody(resp, "", model)
	if err != nil {
		return nil, err
	}
	out, e := parseEmbeddings(resp.StatusCode, data, len(req.Input))
	if e != nil {
		e.Model = model
		e.Redact(key)
		return nil, e
	}
	out.Model = model
	return out, nil
}

// embedBody encodes req as an EmbedContentRequest for one input, else a
// BatchEmbedContentsRequest.
func (p *Provider) embedBody(req *llmclient.EmbedRequest, model string) ([]byte, error) {
	switch {
	case model == "":
		return nil, errors.New("gemini: no model")
	case len(req.Input) == 0:
		return nil, errors.New("gemini: embed request has no input")
	case len(req.Input) > p.maxEmbedBatch:
		return nil, fmt.Errorf("gemini: embed request has %d inputs, more than MaxEmbedBatch %d", len(req.Input), p.maxEmbedBatch)
	case req.Dimensions < 0:
		return nil, errors.New("gemini: embed Dimensions is negative")
	case req.Dimensions > math.MaxInt32:
		return nil, errors.New("gemini: embed Dimensions exceeds outputDimensionality's int32 range")
	}
	reqs := make([]wireEmbedRequest, len(req.Input))
	for i, text := range req.Input {
		if text == "" {
			return nil, fmt.Errorf("gemini: embed input %d is empty", i)
		}
		reqs[i] = wireEmbedRequest{Model: "models/" + model, Content: wireContent{Parts: []wirePart{{Text: text}}},
			TaskType: req.TaskType, OutputDimensionality: req.Dimensions}
	}
	var v any = &reqs[0]
	if len(reqs) > 1 {
		v = struct {
			Requests []wireEmbedRequest `json:"requests"`
		}{reqs}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("gemini: encode embed request: %w", err)
	}
	if body, err = jsonx.MergeExtra(body, req.Extra); err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return body, nil
}

// parseEmbeddings decodes a 2xx embedContent or batchEmbedContents body that must hold n
// vectors of one length.
func parseEmbeddings(status int, body []byte, n int) (*llmclient.EmbedResponse, *llmclient.Error) {
	var w wireEmbedResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, malformed(status, body, fmt.Errorf("malformed embedding response: %w", err))
	}
	if w.Error != nil {
		return nil, inBandError(status, w.Error)
	}
	vecs := w.Embeddings
	if w.Embedding != nil && len(vecs) == 0 {
		vecs = []wireEmbedding{*w.Embedding}
	}
	if len(vecs) != n {
		return nil, malformed(status, nil, fmt.Errorf("embedding response has %d vectors for %d inputs", len(vecs), n))
	}
	out := &llmclient.EmbedResponse{Vectors: make([][]float32, n)}
	for i, v := range vecs {
		if len(v.Values) == 0 || len(v.Values) != len(vecs[0].Values) {
			return nil, malformed(status, nil, errors.New("embedding response has an empty vector or mixes vector lengths"))
		}
		out.Vectors[i] = v.Values
	}
	if u := w.UsageMetadata; u != nil {
		out.Usage = llmclient.Usage{InputTokens: int(u.PromptTokenCount), TotalTokens: int(u.PromptTokenCount)}
	}
	return out, nil
}
