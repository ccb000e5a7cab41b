package gemini

import (
	"net/http"
	"net/textproto"
)

// Option configures a Provider. Options are applied in order; the last one of a kind wins.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	baseURL    string
	apiKey     string
	apiVersion string
	project    string
	location   string
	vertex     bool
	client     *http.Client
	clientSet  bool
	header     http.Header

	maxEmbedBatch    int
	maxEmbedBatchSet bool
}

// DefaultBaseURL is the Gemini API's base URL.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// WithBaseURL sets the API base URL, without the version path. Default: DefaultBaseURL, or
// with WithVertex https://{location}-aiplatform.googleapis.com (https://aiplatform.googleapis.com
// for the "global" location). Use it for gateways and tests.
func WithBaseURL(u string) Option { return optionFunc(func(c *config) { c.baseURL = u }) }

// WithAPIKey sets the credential used when the Call carries none (an upstream without a
// key pool): the Gemini API key, sent as x-goog-api-key, or with WithVertex an OAuth 2
// access token, sent as "Authorization: Bearer". Default: none, in which case every Call
// must carry one. Access tokens expire: with Vertex AI, give the upstream fresh tokens.
func WithAPIKey(key string) Option { return optionFunc(func(c *config) { c.apiKey = key }) }

// WithAPIVersion sets the API version path segment. Default "v1beta" for the Gemini API,
// "v1" for Vertex AI.
func WithAPIVersion(v string) Option { return optionFunc(func(c *config) { c.apiVersion = v }) }

// WithVertex switches to the Vertex AI endpoint of a Google Cloud project and location
// (such as "us-central1" or "global"):
//
//	{base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
//
// The credential (Call.APIKey or WithAPIKey) is then an OAuth 2 access token sent as
// "Authorization: Bearer <token>". Default: the Gemini API (generativelanguage).
func WithVertex(project, location string) Option {
	return optionFunc(func(c *config) { c.vertex, c.project, c.location = true, project, location })
}

// WithHTTPClient sets the HTTP client (default: a new httpx.DefaultClient, with no overall
// timeout; calls are bounded by their context). A nil client is rejected by New. The
// Provider uses a copy that shares its Transport and follows a redirect only to the same
// host, never from https to http, so that the credential header goes nowhere else; a
// redirect it does not follow is returned as an error with the 3xx status.
func WithHTTPClient(hc *http.Client) Option {
	return optionFunc(func(c *config) { c.client, c.clientSet = hc, true })
}

// WithHeader adds a header to every request. It is set after the Provider's own headers,
// so it can replace them (the credential header excepted). Repeat the option for several
// headers; a later value for the same key replaces an earlier one.
func WithHeader(key, value string) Option {
	return optionFunc(func(c *config) {
		if c.header == nil {
			c.header = make(http.Header)
		}
		c.header.Set(textproto.CanonicalMIMEHeaderKey(key), value)
	})
}
