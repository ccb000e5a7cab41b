// Package format names the structured outputs a request can ask for ([Type]), in
// llmclient.ResponseFormat:
//
//	req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Name: "answer", Schema: schema}
package format

// Type selects structured output.
type Type string

// The response formats.
const (
	Text       Type = "text"
	JSONObject Type = "json_object"
	JSONSchema Type = "json_schema"
)
