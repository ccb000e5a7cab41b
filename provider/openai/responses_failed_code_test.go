package openai_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

// responseErrorCodes is the class of every code of the Responses API's ResponseErrorCode
// enum (openai-openapi.yaml), and of a code it does not list. A code that names a problem
// with the request (mostly an image the caller sent) or a policy block is not a server
// error: retrying or failing over the same request cannot succeed, and counting it against
// the upstream's breaker would mark a healthy upstream down.
var responseErrorCodes = map[string]failure.Class{
	"server_error":         failure.ServerError,
	"rate_limit_exceeded":  failure.RateLimited,
	"vector_store_timeout": failure.ServerError,
	// Not described by the spec: left to the default for an in-band failure.
	"data_residency_mismatch": failure.ServerError,
	// Policy blocks.
	"invalid_prompt":                 failure.ContentFiltered,
	"bio_policy":                     failure.ContentFiltered,
	"image_content_policy_violation": failure.ContentFiltered,
	// The request's images.
	"invalid_image":                failure.BadRequest,
	"invalid_image_format":         failure.BadRequest,
	"invalid_base64_image":         failure.BadRequest,
	"invalid_image_url":            failure.BadRequest,
	"image_too_large":              failure.BadRequest,
	"image_too_small":              failure.BadRequest,
	"image_parse_error":            failure.BadRequest,
	"invalid_image_mode":           failure.BadRequest,
	"image_file_too_large":         failure.BadRequest,
	"unsupported_image_media_type": failure.BadRequest,
	"empty_image_file":             failure.BadRequest,
	"failed_to_download_image":     failure.BadRequest,
	"image_file_not_found":         failure.BadRequest,
	// Unknown: the server broke a response it had accepted.
	"some_future_code": failure.ServerError,
}

// TestResponsesFailedCodeClasses checks the class of a failed Response by its
// error.code, in a one-shot body and in a stream's response.failed event.
func TestResponsesFailedCodeClasses(t *testing.T) {
	for code, want := range responseErrorCodes {
		t.Run(code, func(t *testing.T) {
			body := `{"id":"resp_1","object":"response","status":"failed","model":"gpt-4.1","output":[],"usage":null,"incomplete_details":null,
"error":{"code":"` + code + `","message":"The request failed: ` + code + `."}}`
			p, _ := responsesProvider(t, reply{Body: body})
			if e := providertest.CompleteError(t, p, simpleCall("gpt-4.1")); e.Class != want || e.Code != code {
				t.Errorf("one-shot: class %v, code %q; want %v, %q (%+v)", e.Class, e.Code, want, code, e)
			}
			stream := sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-4.1","status":"in_progress"}}`) +
				sseEvent("response.failed", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-4.1","output":[],"usage":null,"error":{"code":"`+code+`","message":"failed"}}}`)
			ps, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: stream})
			st, err := ps.Stream(context.Background(), simpleCall("gpt-4.1"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, e := providertest.DrainError(t, st)
			if e.Class != want {
				t.Errorf("stream: class %v, want %v (%+v)", e.Class, want, e)
			}
		})
	}
}

// TestResponsesErrorEventCodeClasses checks the same codes in a stream's "error" event.
func TestResponsesErrorEventCodeClasses(t *testing.T) {
	for code, want := range responseErrorCodes {
		t.Run(code, func(t *testing.T) {
			stream := sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-4.1","status":"in_progress"}}`) +
				sseEvent("error", `{"type":"error","sequence_number":1,"code":"`+code+`","message":"failed","param":null}`)
			p, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: stream})
			st, err := p.Stream(context.Background(), simpleCall("gpt-4.1"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, e := providertest.DrainError(t, st); e.Class != want {
				t.Errorf("class %v, want %v (%+v)", e.Class, want, e)
			}
		})
	}
}

// TestPolicyCodesAreContentFiltered checks that an HTTP error whose code is one of the
// Responses API's policy codes is content_filtered, as content_policy_violation is,
// whatever its status.
func TestPolicyCodesAreContentFiltered(t *testing.T) {
	for _, code := range []string{"bio_policy", "image_content_policy_violation"} {
		body := `{"error":{"message":"blocked","type":"invalid_request_error","param":null,"code":"` + code + `"}}`
		p := newProvider(t, newUpstream(t, reply{Status: 400, Body: body}))
		if e := providertest.CompleteError(t, p, simpleCall("gpt-4.1")); e.Class != failure.ContentFiltered {
			t.Errorf("400 %s: class %v, want content_filtered", code, e.Class)
		}
	}
}
