package openai_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
)

// errorRows are documented error responses (VENDOR-FACTS.md and the vendors' docs) and the
// class each must get. They also seed FuzzClassifyError.
var errorRows = []struct {
	name    string
	status  int
	body    string
	class   failure.Class
	typ     string
	code    string
	param   string
	message string // substring of Error.Message
	retry   time.Duration
}{
	// OpenAI.
	{"openai 429 rate_limit_exceeded with hint", 429,
		`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 200000, Used 199821, Requested 2295. Please try again in 634ms. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		failure.RateLimited, "tokens", "rate_limit_exceeded", "", "Please try again in 634ms", 634 * time.Millisecond},
	{"openai 429 requests try again in 6m0s", 429,
		`{"error":{"message":"Rate limit reached for o1 in organization org-abc on requests per day (RPD): Limit 100, Used 100, Requested 1. Please try again in 6m0s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		failure.RateLimited, "requests", "rate_limit_exceeded", "", "requests per day", 6 * time.Minute},
	{"openai 429 slow_down", 429,
		`{"error":{"message":"Please reduce your rate of requests.","type":"rate_limit_error","param":null,"code":"slow_down"}}`,
		failure.RateLimited, "rate_limit_error", "slow_down", "", "reduce your rate", 0},
	{"openai 429 insufficient_quota", 429,
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		failure.QuotaExhausted, "insufficient_quota", "insufficient_quota", "", "exceeded your current quota", 0},
	{"openai 429 credit_balance_exhausted", 429,
		`{"error":{"message":"Your credit balance is too low.","type":"insufficient_quota","param":null,"code":"credit_balance_exhausted"}}`,
		failure.QuotaExhausted, "insufficient_quota", "credit_balance_exhausted", "", "credit balance", 0},
	{"openai 429 organization_spend_limit_exceeded", 429,
		`{"error":{"message":"Organization spend limit reached.","type":"insufficient_quota","param":null,"code":"organization_spend_limit_exceeded"}}`,
		failure.QuotaExhausted, "insufficient_quota", "organization_spend_limit_exceeded", "", "spend limit", 0},
	{"openai 429 project_spend_limit_exceeded, type not quota", 429,
		`{"error":{"message":"Project spend limit reached.","type":"invalid_request_error","param":null,"code":"project_spend_limit_exceeded"}}`,
		failure.QuotaExhausted, "invalid_request_error", "project_spend_limit_exceeded", "", "Project spend limit", 0},
	{"openai 429 organization_usage_limit_exceeded", 429,
		`{"error":{"message":"Usage limit reached.","type":"insufficient_quota","param":null,"code":"organization_usage_limit_exceeded"}}`,
		failure.QuotaExhausted, "insufficient_quota", "organization_usage_limit_exceeded", "", "Usage limit", 0},
	{"any *_spend_limit_exceeded", 429,
		`{"error":{"message":"Monthly spend limit reached.","type":"rate_limit_error","param":null,"code":"monthly_spend_limit_exceeded"}}`,
		failure.QuotaExhausted, "rate_limit_error", "monthly_spend_limit_exceeded", "", "Monthly", 0},
	{"openai 400 context_length_exceeded", 400,
		`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		failure.ContextLength, "invalid_request_error", "context_length_exceeded", "messages", "maximum context length", 0},
	{"openai 400 invalid_prompt", 400,
		`{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`,
		failure.ContentFiltered, "invalid_request_error", "invalid_prompt", "", "flagged", 0},
	{"openai 400 unsupported_parameter mentions no context", 400,
		`{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`,
		failure.BadRequest, "invalid_request_error", "unsupported_parameter", "max_tokens", "Unsupported parameter", 0},
	{"a word code beats a context-like message", 400,
		`{"error":{"message":"'max_tokens' exceeds the context window","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`,
		failure.BadRequest, "invalid_request_error", "invalid_value", "max_tokens", "context window", 0},
	{"openai 401 invalid_api_key", 401,
		`{"error":{"message":"Incorrect API key provided: sk-abc***def. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		failure.Auth, "invalid_request_error", "invalid_api_key", "", "Incorrect API key", 0},
	{"openai 403 region", 403,
		`{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`,
		failure.Permission, "request_forbidden", "unsupported_country_region_territory", "", "not supported", 0},
	{"openai 404 model_not_found", 404,
		`{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
		failure.NotFound, "invalid_request_error", "model_not_found", "", "does not exist", 0},
	{"408", 408, `{"error":{"message":"Request timed out.","type":"timeout","param":null,"code":null}}`,
		failure.Timeout, "timeout", "", "", "timed out", 0},
	{"409 lock contention", 409, `{"error":{"message":"Could not acquire lock on resource.","type":"server_error","param":null,"code":null}}`,
		failure.ServerError, "server_error", "", "", "lock", 0},
	{"413", 413, `{"error":{"message":"Request entity too large","type":"invalid_request_error","param":null,"code":null}}`,
		failure.BadRequest, "invalid_request_error", "", "", "too large", 0},
	{"openai 500", 500,
		`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
		failure.ServerError, "server_error", "", "", "server had an error", 0},
	{"openai 503 server_is_overloaded", 503,
		`{"error":{"message":"The engine is currently overloaded, please try again later.","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`,
		failure.Overloaded, "service_unavailable_error", "server_is_overloaded", "", "overloaded", 0},
	{"503 plain", 503, `{"error":{"message":"Service Unavailable","type":"server_error","param":null,"code":null}}`,
		failure.ServerError, "server_error", "", "", "Service Unavailable", 0},
	{"504", 504, `{"error":{"message":"Gateway timeout.","type":"server_error","param":null,"code":null}}`,
		failure.ServerError, "server_error", "", "", "Gateway", 0},
	{"529 overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		failure.Overloaded, "overloaded_error", "", "", "Overloaded", 0},
	{"other 5xx", 520, `{"error":{"message":"Unknown","type":"server_error","param":null,"code":null}}`,
		failure.ServerError, "server_error", "", "", "Unknown", 0},
	{"other 4xx", 418, `{"error":{"message":"I'm a teapot","type":"invalid_request_error","param":null,"code":null}}`,
		failure.BadRequest, "invalid_request_error", "", "", "teapot", 0},

	// Azure OpenAI.
	{"azure 429 retry after 37 seconds", 429,
		`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 37 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`,
		failure.RateLimited, "", "429", "", "exceeded token rate limit", 37 * time.Second},
	{"azure 400 content_filter", 400,
		`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":true,"detected":true},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}}}`,
		failure.ContentFiltered, "", "content_filter", "prompt", "content management policy", 0},
	{"azure innererror alone", 400,
		`{"error":{"message":"Filtered.","type":null,"param":"prompt","code":"invalid_request","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`,
		failure.ContentFiltered, "", "invalid_request", "prompt", "Filtered", 0},
	{"azure inner_error spelling", 400,
		`{"error":{"message":"Filtered.","code":"invalid_prompt_x","inner_error":{"code":"ResponsibleAIPolicyViolation"}}}`,
		failure.ContentFiltered, "", "invalid_prompt_x", "", "Filtered", 0},
	{"azure 404 DeploymentNotFound", 404,
		`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`,
		failure.NotFound, "", "DeploymentNotFound", "", "deployment", 0},
	{"azure 401", 401,
		`{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`,
		failure.Auth, "", "401", "", "Access denied", 0},

	// DeepSeek.
	{"deepseek 402 insufficient balance", 402,
		`{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`,
		failure.QuotaExhausted, "unknown_error", "invalid_request_error", "", "Insufficient Balance", 0},
	{"deepseek 422", 422,
		`{"error":{"message":"Invalid Parameters","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
		failure.BadRequest, "invalid_request_error", "invalid_request_error", "", "Invalid Parameters", 0},
	{"deepseek 400 context, generic code", 400,
		`{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
		failure.ContextLength, "invalid_request_error", "invalid_request_error", "", "maximum context length", 0},
	{"deepseek 429", 429,
		`{"error":{"message":"Rate Limit Reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`,
		failure.RateLimited, "rate_limit_error", "rate_limit_exceeded", "", "Rate Limit", 0},
	{"deepseek 503 server overloaded", 503,
		`{"error":{"message":"Server Overloaded","type":"server_error","param":null,"code":null}}`,
		failure.Overloaded, "server_error", "", "", "Server Overloaded", 0},
	{"deepseek 503 plain text", 503, `Server Overloaded`,
		failure.Overloaded, "", "", "", "Server Overloaded", 0},

	// vLLM and other compatible servers.
	{"vllm 400 context, integer code", 400,
		`{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
		failure.ContextLength, "BadRequestError", "400", "", "maximum context length", 0},
	{"vllm flat 400 context", 400,
		`{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2100 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}`,
		failure.ContextLength, "BadRequestError", "400", "", "maximum context length", 0},
	{"vllm flat 400 other", 400,
		`{"object":"error","message":"temperature must be non-negative, got -1.0.","type":"BadRequestError","param":null,"code":400}`,
		failure.BadRequest, "BadRequestError", "400", "", "temperature", 0},
	{"vllm 404 model", 404,
		`{"error":{"message":"The model ` + "`llama`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
		failure.NotFound, "NotFoundError", "404", "model", "does not exist", 0},
	{"mistral context, numeric code string", 400,
		`{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_error","param":null,"code":"3051"}`,
		failure.ContextLength, "invalid_request_error", "3051", "", "maximum context length", 0},
	{"groq 429 try again in 7.66s", 429,
		`{"error":{"message":"Rate limit reached for model ` + "`llama-3.3-70b-versatile`" + ` in organization ` + "`org_01`" + ` service tier ` + "`on_demand`" + ` on tokens per minute (TPM): Limit 12000, Used 11000, Requested 2000. Please try again in 7.66s. Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing","type":"tokens","code":"rate_limit_exceeded"}}`,
		failure.RateLimited, "tokens", "rate_limit_exceeded", "", "Please try again in 7.66s", 7660 * time.Millisecond},
	{"openrouter 402", 402,
		`{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","metadata":{}}}`,
		failure.QuotaExhausted, "", "402", "", "Insufficient credits", 0},
	{"ollama 404", 404,
		`{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
		failure.NotFound, "api_error", "", "", "not found", 0},
	{"gemini compatible endpoint, array-wrapped", 429,
		`[{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 10.68s.","status":"RESOURCE_EXHAUSTED"}}]`,
		failure.RateLimited, "RESOURCE_EXHAUSTED", "429", "", "exceeded your current quota", 10680 * time.Millisecond},
	{"error as a string", 500, `{"error":"upstream failed"}`,
		failure.ServerError, "", "", "", "upstream failed", 0},

	// Bodies that are not vendor JSON.
	{"html 502 from a proxy", 502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
		failure.ServerError, "", "", "", "<html> <head><title>502 Bad Gateway</title></head>", 0},
	{"empty 500", 500, ``, failure.ServerError, "", "", "", "", 0},
	{"json without error shape", 400, `{"detail":"Not Found"}`, failure.BadRequest, "", "", "", `{"detail":"Not Found"}`, 0},
}

func TestClassifyErrorRows(t *testing.T) {
	for _, tt := range errorRows {
		t.Run(tt.name, func(t *testing.T) {
			e := openai.ClassifyError(tt.status, http.Header{}, []byte(tt.body))
			if e.Class != tt.class {
				t.Errorf("class %v; want %v", e.Class, tt.class)
			}
			if e.Status != tt.status || e.Type != tt.typ || e.Code != tt.code || e.Param != tt.param {
				t.Errorf("status %d type %q code %q param %q; want %d %q %q %q", e.Status, e.Type, e.Code, e.Param, tt.status, tt.typ, tt.code, tt.param)
			}
			if !strings.Contains(e.Message, tt.message) {
				t.Errorf("message %q lacks %q", e.Message, tt.message)
			}
			if e.RetryAfter != tt.retry {
				t.Errorf("RetryAfter %v; want %v", e.RetryAfter, tt.retry)
			}
			if e.ShouldRetry != nil || e.RateLimits != nil || e.RequestID != "" {
				t.Errorf("header fields set without headers: %+v", e)
			}
		})
	}
}

// TestErrorsThroughComplete sends the rows through a real HTTP exchange.
func TestErrorsThroughComplete(t *testing.T) {
	for _, tt := range errorRows {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, reply{Status: tt.status, Body: tt.body})
			p := newProvider(t, u, openai.WithAPIKey("sk-live-SECRET"))
			e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
			if e.Class != tt.class || e.Status != tt.status || e.Model != "gpt-4o" {
				t.Fatalf("got class %v status %d model %q; want %v %d", e.Class, e.Status, e.Model, tt.class, tt.status)
			}
			if strings.Contains(e.Error(), "sk-live-SECRET") {
				t.Fatalf("error leaks the key: %v", e)
			}
		})
	}
}

func TestErrorHeaders(t *testing.T) {
	rateLimitBody := `{"error":{"message":"Rate limit reached. Please try again in 634ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	yes, no := true, false
	tests := []struct {
		name      string
		header    map[string]string
		body      string
		retry     time.Duration
		should    *bool
		requestID string
	}{
		{"retry-after-ms", map[string]string{"Retry-After-Ms": "1500"}, rateLimitBody, 1500 * time.Millisecond, nil, ""},
		{"retry-after seconds", map[string]string{"Retry-After": "20"}, rateLimitBody, 20 * time.Second, nil, ""},
		{"x-ms-retry-after-ms (Azure)", map[string]string{"X-Ms-Retry-After-Ms": "2500", "Retry-After": "3"}, rateLimitBody, 2500 * time.Millisecond, nil, ""},
		{"retry-after-ms beats retry-after", map[string]string{"Retry-After-Ms": "100", "Retry-After": "3"}, rateLimitBody, 100 * time.Millisecond, nil, ""},
		{"header beats message hint", map[string]string{"Retry-After": "2"}, rateLimitBody, 2 * time.Second, nil, ""},
		{"message hint without headers", nil, rateLimitBody, 634 * time.Millisecond, nil, ""},
		{"unparsable header falls back to hint", map[string]string{"Retry-After": "soon"}, rateLimitBody, 634 * time.Millisecond, nil, ""},
		{"429 without any hint", nil, `{"error":{"message":"Too many requests","type":"requests","code":"rate_limit_exceeded"}}`, 0, nil, ""},
		{"x-should-retry true", map[string]string{"X-Should-Retry": "true"}, rateLimitBody, 634 * time.Millisecond, &yes, ""},
		{"x-should-retry false", map[string]string{"X-Should-Retry": "false"}, rateLimitBody, 634 * time.Millisecond, &no, ""},
		{"x-request-id", map[string]string{"X-Request-Id": "req_abc", "Apim-Request-Id": "apim-1"}, rateLimitBody, 634 * time.Millisecond, nil, "req_abc"},
		{"apim-request-id (Azure)", map[string]string{"Apim-Request-Id": "5d4b0b3e-apim"}, rateLimitBody, 634 * time.Millisecond, nil, "5d4b0b3e-apim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, reply{Status: 429, Header: tt.header, Body: tt.body})
			p := newProvider(t, u)
			e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
			if e.Class != failure.RateLimited || e.RetryAfter != tt.retry || e.RequestID != tt.requestID {
				t.Fatalf("class %v RetryAfter %v RequestID %q; want rate_limited %v %q", e.Class, e.RetryAfter, e.RequestID, tt.retry, tt.requestID)
			}
			switch {
			case tt.should == nil && e.ShouldRetry != nil:
				t.Fatalf("ShouldRetry = %v; want nil", *e.ShouldRetry)
			case tt.should != nil && (e.ShouldRetry == nil || *e.ShouldRetry != *tt.should):
				t.Fatalf("ShouldRetry = %v; want %v", e.ShouldRetry, *tt.should)
			}
		})
	}
}

// TestRetryAfterHTTPDate runs in a synctest bubble, where time.Now is fixed at
// 2000-01-01 00:00:00 UTC, so ClassifyError's use of the clock is deterministic.
func TestRetryAfterHTTPDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.Header{}
		h.Set("Retry-After", time.Now().Add(42*time.Second).UTC().Format(http.TimeFormat))
		e := openai.ClassifyError(429, h, []byte(`{"error":{"message":"slow down","code":"rate_limit_exceeded"}}`))
		if e.RetryAfter != 42*time.Second {
			t.Fatalf("RetryAfter = %v; want 42s", e.RetryAfter)
		}
		h.Set("Retry-After", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
		if e := openai.ClassifyError(429, h, nil); e.RetryAfter != 0 {
			t.Fatalf("past date: RetryAfter = %v; want 0", e.RetryAfter)
		}
	})
}

func TestErrorCarriesRateLimits(t *testing.T) {
	u := newUpstream(t, reply{Status: 429, Header: map[string]string{
		"X-Ratelimit-Limit-Requests": "500", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1s",
		"X-Ratelimit-Limit-Tokens": "30000", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "12ms",
	}, Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`})
	p := newProvider(t, u)
	e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
	want := ratelimit.Status{
		Requests: ratelimit.Window{Known: true, Limit: 500, Remaining: 0, Reset: time.Second},
		Tokens:   ratelimit.Window{Known: true, Limit: 30000, Remaining: 0, Reset: 12 * time.Millisecond},
	}
	if e.RateLimits == nil || *e.RateLimits != want {
		t.Fatalf("RateLimits = %+v; want %+v", e.RateLimits, want)
	}
}

func TestErrorBodyBounded(t *testing.T) {
	// A 3 MiB error page: read at most 1 MiB, keep a short message.
	u := newUpstream(t, reply{Status: 502, Body: strings.Repeat("<p>bad gateway</p>", 3<<20/18)})
	p := newProvider(t, u)
	e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
	if e.Class != failure.ServerError || len(e.Message) > 200 || !strings.HasPrefix(e.Message, "<p>bad gateway</p>") {
		t.Fatalf("class %v message (%d bytes) %q", e.Class, len(e.Message), e.Message)
	}
	// A huge vendor message is cut.
	long := `{"error":{"message":"` + strings.Repeat("é", 5000) + `","code":"server_error"}}`
	e = openai.ClassifyError(500, nil, []byte(long))
	if len(e.Message) > 1100 || !strings.HasSuffix(e.Message, "…") || !strings.HasPrefix(e.Message, "éé") {
		t.Fatalf("message not truncated cleanly: %d bytes", len(e.Message))
	}
}

func TestInBandErrors(t *testing.T) {
	// Status below 400: an error object inside a 200 body or stream.
	tests := []struct {
		body  string
		class failure.Class
	}{
		{`{"error":{"message":"Rate limit","type":"rate_limit_error","code":"rate_limit_exceeded"}}`, failure.RateLimited},
		{`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, failure.QuotaExhausted},
		{`{"error":{"message":"The server had an error","type":"server_error","code":null}}`, failure.ServerError},
		{`{"error":{"message":"Overloaded","type":"overloaded_error"}}`, failure.Overloaded},
		{`{"error":{"message":"engine overloaded","code":"server_is_overloaded"}}`, failure.Overloaded},
		{`{"error":{"message":"bad","type":"invalid_request_error","code":null}}`, failure.BadRequest},
		{`{"error":{"message":"no","type":"authentication_error"}}`, failure.Auth},
		{`{"error":{"message":"Provider returned error","code":429}}`, failure.RateLimited},
		{`{"error":{"message":"Provider returned error","code":"503"}}`, failure.ServerError},
		{`{"error":{"message":"too long","code":"context_length_exceeded"}}`, failure.ContextLength},
		{`{"error":{"message":"filtered","code":"content_filter"}}`, failure.ContentFiltered},
		{`{"object":"error","message":"Internal server error","type":"InternalServerError","param":null,"code":500}`, failure.ServerError},
		{`{"error":{"message":"something odd"}}`, failure.ServerError},
		{`not json`, failure.ServerError},
	}
	for _, tt := range tests {
		if e := openai.ClassifyError(200, nil, []byte(tt.body)); e.Class != tt.class || e.Status != 200 {
			t.Errorf("ClassifyError(200, %s) = class %v status %d; want %v", tt.body, e.Class, e.Status, tt.class)
		}
	}
}

func FuzzClassifyError(f *testing.F) {
	for _, r := range errorRows {
		f.Add(r.status, r.body, "")
	}
	f.Add(200, `{"error":{"code":429}}`, "")
	f.Add(429, `{"error":{"message":"try again in 5s"}}`, "12")
	f.Add(503, `[{"error":[]}]`, "Sun, 06 Nov 1994 08:49:37 GMT")
	f.Add(400, `{"error":{"code":{"x":1},"message":7,"param":["a"],"innererror":"x"}}`, "-1")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("X-Ratelimit-Reset-Tokens", retryAfter)
		e := openai.ClassifyError(status, h, []byte(body))
		if e == nil {
			t.Fatal("nil error")
		}
		if status >= 400 && (e.Class == failure.None || e.Class == failure.Unknown) {
			t.Fatalf("status %d: class %v", status, e.Class)
		}
		if e.Status != status || e.RetryAfter < 0 {
			t.Fatalf("status %d RetryAfter %v", e.Status, e.RetryAfter)
		}
		if len(e.Message) > 1100 {
			t.Fatalf("message of %d bytes", len(e.Message))
		}
	})
}

// A request larger than the key's per-minute token limit can never be admitted there:
// it is rate limited, but marked not worth retrying on this upstream (failover may help).
func TestRequestTooLargeForTPMIsNotRetriedHere(t *testing.T) {
	body := `{"error":{"message":"Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	e := openai.ClassifyError(429, http.Header{}, []byte(body))
	if e.Class != failure.RateLimited {
		t.Fatalf("class %v, want rate_limited", e.Class)
	}
	if e.ShouldRetry == nil || *e.ShouldRetry {
		t.Fatalf("ShouldRetry %v, want false", e.ShouldRetry)
	}
	// An ordinary rate limit stays retryable.
	e = openai.ClassifyError(429, http.Header{}, []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`))
	if e.ShouldRetry != nil {
		t.Fatalf("ShouldRetry %v on an ordinary rate limit", *e.ShouldRetry)
	}
}
