package specs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// Op names an API operation whose request body a test validates.
type Op string

// The operations, named after their vendor's path.
const (
	OpChatCompletions       Op = "openai POST /chat/completions"
	OpResponses             Op = "openai POST /responses"
	OpEmbeddings            Op = "openai POST /embeddings"
	OpMessages              Op = "anthropic POST /v1/messages"
	OpGenerateContent       Op = "gemini POST /models/{modelsId}:generateContent"
	OpStreamGenerateContent Op = "gemini POST /models/{modelsId}:streamGenerateContent"
	OpEmbedContent          Op = "gemini POST /models/{modelsId}:embedContent"
	OpBatchEmbedContents    Op = "gemini POST /models/{modelsId}:batchEmbedContents"
)

// specFile describes one spec in testdata.
type specFile struct {
	name   string
	sha256 string
	yaml   bool
	fix    func(doc any)
}

var specFiles = map[string]specFile{
	"openai":    {name: "openai-openapi.yaml", sha256: "db5d7478feae10b4d331834c60d9765a8aa042e38419f9b1694288c11aa8ebc8", yaml: true, fix: fixOpenAI},
	"anthropic": {name: "anthropic-openapi.json", sha256: "b53f82a0caa6daa36dfacb2446bf181b9d1076ae95004a81292a92a52ada1145"},
	"gemini":    {name: "gemini-openapi.json", sha256: "32ca011718d5d2d81594495224a590d383892df3315ad6ce0b1fc4c7719f3720", fix: fixGemini},
}

// validators holds the compiled request schema of every operation.
type validators struct {
	schemas map[Op]*jsonschema.Schema
}

var (
	loadOnce sync.Once
	loaded   *validators
	loadErr  error
)

// specs returns the compiled validators, loading the spec files once per test binary.
func specs(t testing.TB) *validators {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = load() })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func load() (*validators, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	docs := map[string]any{}
	for vendor, f := range specFiles {
		doc, err := readSpec(f)
		if err != nil {
			return nil, err
		}
		if err := c.AddResource(resourceURL(vendor), doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		docs[vendor] = doc
	}
	v := &validators{schemas: map[Op]*jsonschema.Schema{}}
	for _, op := range []Op{OpChatCompletions, OpResponses, OpEmbeddings, OpMessages, OpGenerateContent,
		OpStreamGenerateContent, OpEmbedContent, OpBatchEmbedContents} {
		vendor, method, path := splitOp(op)
		ref, err := requestRef(docs[vendor], method, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		s, err := c.Compile(resourceURL(vendor) + ref)
		if err != nil {
			return nil, fmt.Errorf("%s: compiling %s: %w", op, ref, err)
		}
		v.schemas[op] = s
	}
	return v, nil
}

func resourceURL(vendor string) string { return "https://specs.invalid/" + vendor + ".json" }

func splitOp(op Op) (vendor, method, path string) {
	f := strings.Fields(string(op))
	return f[0], strings.ToLower(f[1]), f[2]
}

// requestRef returns the $ref of an operation's application/json request body, as a
// fragment ("#/components/schemas/…").
func requestRef(doc any, method, path string) (string, error) {
	m, ok := dig(doc, "paths", path, method, "requestBody", "content", "application/json", "schema").(map[string]any)
	if !ok {
		return "", fmt.Errorf("the spec has no JSON request body for %s %s", method, path)
	}
	ref, _ := m["$ref"].(string)
	if !strings.HasPrefix(ref, "#/") {
		return "", fmt.Errorf("request body schema of %s %s is not a local $ref", method, path)
	}
	return ref, nil
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// readSpec reads a spec file, checks it is the verbatim copy, decodes it into the
// validator's JSON model and applies the file's fixes.
func readSpec(f specFile) (any, error) {
	data, err := os.ReadFile(filepath.Join("testdata", f.name))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.sha256 {
		return nil, fmt.Errorf("%s: sha256 differs from the copy described in testdata/README.md", f.name)
	}
	if f.yaml {
		var y any
		if err := yaml.Unmarshal(data, &y); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if data, err = json.Marshal(jsonModel(y)); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	if f.fix != nil {
		f.fix(doc)
	}
	return doc, nil
}

// jsonModel converts what yaml.v3 decodes into values encoding/json can encode: maps with
// non-string keys get string keys, timestamps become their YAML text form.
func jsonModel(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonModel(e)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = jsonModel(e)
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = jsonModel(e)
		}
		return v
	case time.Time:
		if v.Hour() == 0 && v.Minute() == 0 && v.Second() == 0 && v.Nanosecond() == 0 {
			return v.Format(time.DateOnly)
		}
		return v.Format(time.RFC3339Nano)
	}
	return v
}

// walk calls f on every JSON object of v, children first.
func walk(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			walk(e, f)
		}
		f(v)
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

// fixOpenAI applies fixNullable and fixDiscriminators, and replaces the draft 2019-09 pair
// $recursiveAnchor / $recursiveRef (CompoundFilter refers to itself with it), which
// 2020-12 dropped, by a plain $ref to the schema that holds the anchor.
func fixOpenAI(doc any) {
	fixNullable(doc)
	fixDiscriminators(doc)
	schemas, _ := dig(doc, "components", "schemas").(map[string]any)
	for name, s := range schemas {
		m, ok := s.(map[string]any)
		if !ok || m["$recursiveAnchor"] == nil {
			continue
		}
		delete(m, "$recursiveAnchor")
		walk(m, func(o map[string]any) {
			if ref, ok := o["$recursiveRef"].(string); ok && ref == "#" {
				delete(o, "$recursiveRef")
				o["$ref"] = "#/components/schemas/" + name
			}
		})
	}
}

// fixDiscriminators turns a oneOf that has an OpenAPI discriminator into an anyOf. The
// discriminator picks one alternative by a property; a JSON Schema validator ignores it,
// and where alternatives overlap (the Responses API's InputItem: EasyInputMessage and
// InputMessage both take {"type":"message","role":"user","content":[…]}), a valid body
// matches two of them and fails oneOf. anyOf still requires one alternative to match.
func fixDiscriminators(doc any) {
	walk(doc, func(m map[string]any) {
		if _, ok := m["discriminator"]; !ok {
			return
		}
		if alts, ok := m["oneOf"]; ok {
			delete(m, "oneOf")
			m["anyOf"] = alts
		}
	})
}

// fixNullable rewrites OpenAPI 3.0's nullable: true, which JSON Schema 2020-12 does not
// know, into a schema that admits null.
func fixNullable(doc any) {
	walk(doc, func(m map[string]any) {
		if n, _ := m["nullable"].(bool); !n {
			return
		}
		delete(m, "nullable")
		switch t := m["type"].(type) {
		case string:
			m["type"] = []any{t, "null"}
			return
		case []any:
			m["type"] = append(t, "null")
			return
		}
		inner := make(map[string]any, len(m))
		for k, e := range m {
			inner[k] = e
			delete(m, k)
		}
		m["anyOf"] = []any{inner, map[string]any{"type": "null"}}
	})
}

// fixGemini applies fixNullable and closes every object schema that lists properties:
// the Gemini API rejects unknown fields. Objects with their own additionalProperties (free
// maps such as functionCall.args, JSON-Schema-valued fields) are left open.
func fixGemini(doc any) {
	fixNullable(doc)
	schemas, _ := dig(doc, "components", "schemas").(map[string]any)
	for _, s := range schemas {
		walk(s, func(m map[string]any) {
			if _, ok := m["properties"].(map[string]any); !ok {
				return
			}
			if _, ok := m["additionalProperties"]; !ok {
				m["additionalProperties"] = false
			}
		})
	}
}

// validate checks body against op's request schema and returns the validation error, or
// nil.
func (v *validators) validate(op Op, body []byte) error {
	s := v.schemas[op]
	if s == nil {
		return fmt.Errorf("no schema for %s", op)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return s.Validate(inst)
}

func TestSpecFilesVerbatim(t *testing.T) {
	names := make([]string, 0, len(specFiles))
	for _, f := range specFiles {
		names = append(names, f.name)
	}
	sort.Strings(names)
	for _, n := range names {
		f := specFiles[strings.SplitN(n, "-", 2)[0]]
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.sha256 {
			t.Errorf("%s was changed: keep the spec files verbatim (see testdata/README.md)", n)
		}
	}
}

// TestValidatorRejects proves the validators can fail: each body breaks one rule of its
// operation's schema.
func TestValidatorRejects(t *testing.T) {
	v := specs(t)
	tests := []struct {
		op   Op
		ok   string
		bad  string
		what string
	}{
		{OpChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "image in a system message"},
		{OpChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d"]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e"]}`, "five stop sequences"},
		{OpMessages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"temperature":1}`,
			`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"temperature":1.5}`, "temperature 1.5"},
		{OpMessages, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"f","input":{}}]}]}`,
			`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"functions.f:0","name":"f","input":{}}]}]}`, "tool_use id outside the pattern"},
		{OpGenerateContent, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi","colour":"red"}]}]}`, "unknown field"},
		{OpEmbeddings, `{"model":"m","input":["a"]}`, `{"model":"m","input":[]}`, "empty input"},
		{OpResponses, `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
			`{"model":"m","input":[{"type":"function_call_output","call_id":"` + strings.Repeat("c", 65) + `","output":"x"}]}`, "call_id over 64 characters"},
		{OpBatchEmbedContents, `{"requests":[{"model":"models/m","content":{"parts":[{"text":"a"}]}}]}`,
			`{"requests":[{"model":"models/m","content":{"parts":[{"text":"a"}]},"dims":3}]}`, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(string(tt.op)+"/"+tt.what, func(t *testing.T) {
			if err := v.validate(tt.op, []byte(tt.ok)); err != nil {
				t.Errorf("valid body rejected: %v", err)
			}
			if err := v.validate(tt.op, []byte(tt.bad)); err == nil {
				t.Errorf("%s accepted", tt.what)
			}
		})
	}
}
