package openai

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

// Complete makes one Chat Completions call. A non-2xx response is returned as an
// *llmclient.Error classified by ClassifyError; a 2xx body that is not a valid completion
// is returned as an *llmclient.Error of class failure.ServerError (see parseResponse);
// transport failures are returned wrapped, for the Client to classify.
func (p *Provider) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	resp, err := p.send(ctx, call, false)
	if err != nil {
		return nil, err
	}
	defer httpx.DrainClose(resp.Body)
	body, err := httpx.ReadLimited(resp.Body, httpx.MaxResponseBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return nil, &llmclient.Error{
			Class:      failure.ServerError, // the upstream's fault: retried, failed over
			Model:      call.Model,
			Status:     resp.StatusCode,
			Message:    "openai: response body larger than 32 MiB",
			RequestID:  requestID(resp.Header),
			RateLimits: ParseRateLimits(resp.Header, time.Now()),
			Err:        err,
		}
	}
	if err != nil {
		return nil, &adapter.NetError{Pkg: "openai", Op: "reading response", Err: err}
	}
	parse := parseResponse
	if p.responses {
		parse = parseResponsesBody
	}
	out, e := parse(resp.StatusCode, resp.Header, body, time.Now())
	if e != nil {
		e.Model = call.Model
		e.Redact(p.keyFor(call))
		return nil, e
	}
	return out, nil
}

// send builds the request, sends it and returns a 2xx response with its body open. A
// non-2xx response is read, closed and returned as its classified *llmclient.Error.
func (p *Provider) send(ctx context.Context, call *llmclient.Call, stream bool) (*http.Response, error) {
	if call == nil || call.Request == nil {
		return nil, badRequest("openai: call or request is nil")
	}
	model := call.Model
	if model == "" {
		model = call.Request.Model
	}
	if p.azure && model == "" {
		return nil, badRequest("openai: Azure needs a deployment name: the call's model is empty")
	}
	notes := adapter.NewNotes("openai")
	var body []byte
	var err error
	if p.responses {
		body, err = buildResponsesBody(call.Request, model, stream, notes)
	} else {
		body, err = buildBody(call.Request, model, p.maxField, stream, stream && p.streamUsage, notes)
	}
	call.Notes = append(call.Notes, notes.List()...)
	if err != nil {
		if e, ok := err.(*llmclient.Error); ok {
			return nil, e
		}
		return nil, badRequest(err.Error())
	}
	op := "chat/completions"
	if p.responses {
		op = "responses"
	}
	return p.post(ctx, p.url(op, model), body, model, p.keyFor(call), stream, call.Headers)
}

// url returns the URL of operation op ("chat/completions", "responses", "embeddings")
// for model: below the base URL, or for Azure below the model's deployment.
func (p *Provider) url(op, model string) string {
	if p.azure && op == "responses" {
		// Azure's Responses API is not per deployment: the model in the body names it.
		return strings.TrimSuffix(p.azurePrefix, "deployments/") + op + p.azureQuery
	}
	if p.azure {
		return p.azurePrefix + url.PathEscape(model) + "/" + op + p.azureQuery
	}
	return p.base + "/" + op
}

// post sends body to target with the credential key and returns a 2xx response with its
// body open; a non-2xx response is returned as its classified *llmclient.Error.
func (p *Provider) post(ctx context.Context, target string, body []byte, model, key string, stream bool, extra http.Header) (*http.Response, error) {
	req, err := httpx.NewPost(ctx, target, body, p.header, stream, extra)
	if err != nil {
		return nil, badRequest("openai: building HTTP request: " + err.Error())
	}
	if key != "" {
		if !httpx.ValidHeaderValue(key) {
			return nil, badRequest("openai: API key contains characters not allowed in a header")
		}
		if p.azure {
			req.Header.Set("Api-Key", key)
		} else {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	return p.sender.Send(req, model, key)
}

// badRequest returns a local validation failure as a failure.BadRequest *llmclient.Error, so
// the Client neither retries nor fails over.
func badRequest(msg string) *llmclient.Error {
	return &llmclient.Error{Class: failure.BadRequest, Message: msg}
}

// Stream opens one streaming Chat Completions call ("stream": true, plus
// stream_options.include_usage unless WithStreamUsage(false)). It returns once the response
// headers arrive: a non-2xx status is returned as the *llmclient.Error ClassifyError makes of
// it, exactly as Complete does; a 2xx response becomes a ProviderStream that owns the body.
func (p *Provider) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	resp, err := p.send(ctx, call, true)
	if err != nil {
		return nil, err
	}
	if p.responses {
		return newResponsesStream(resp, true, p.keyFor(call)), nil
	}
	cs := newChunkStream(resp)
	cs.key = p.keyFor(call)
	cs.drain = true
	return cs, nil
}

// keyFor returns the key a call uses: the pool key it carries, else the WithAPIKey key.
func (p *Provider) keyFor(call *llmclient.Call) string { return p.key(call.APIKey) }

// key returns poolKey, else the WithAPIKey key.
func (p *Provider) key(poolKey string) string {
	if poolKey != "" {
		return poolKey
	}
	return p.apiKey
}
