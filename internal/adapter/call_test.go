package adapter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
)

func TestCheckCall(t *testing.T) {
	noKey := errors.New("vendor: no API key")
	ok := &llmclient.Call{Model: "m", Request: &llmclient.Request{}}
	tests := []struct {
		name  string
		call  *llmclient.Call
		key   string
		class failure.Class
		msg   string
	}{
		{"ready", ok, "sk-1", failure.None, ""},
		{"nil call", nil, "sk-1", failure.BadRequest, "vendor: nil call or request"},
		{"nil request", &llmclient.Call{Model: "m"}, "sk-1", failure.BadRequest, "vendor: nil call or request"},
		{"no key", ok, "", failure.Auth, ""},
		{"key with a newline", ok, "sk-secret\n", failure.BadRequest, "vendor: API key contains characters not allowed in a header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := adapter.CheckCall("vendor", tt.call, tt.key, noKey)
			if tt.class == failure.None {
				if e != nil {
					t.Fatalf("CheckCall = %v, want nil", e)
				}
				return
			}
			if e == nil || e.Class != tt.class || e.Message != tt.msg {
				t.Fatalf("CheckCall = %+v, want class %v, message %q", e, tt.class, tt.msg)
			}
			if strings.Contains(e.Error(), "secret") {
				t.Errorf("key echoed: %q", e.Error())
			}
		})
	}
	if e := adapter.CheckCall("vendor", ok, "", noKey); !errors.Is(e, noKey) || e.Model != "m" {
		t.Errorf("no key: %+v", e)
	}
}

func TestInlineImage(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n0000")
	tests := []struct {
		name        string
		part        llmclient.Part
		mt, data    string
		inline, err bool
	}{
		{"bytes sniffed", llmclient.ImageDataPart("", png), "image/png", "iVBORw0KGgowMDAw", true, false},
		{"bytes typed", llmclient.ImageDataPart("image/webp", []byte("abc")), "image/webp", "YWJj", true, false},
		{"data URL", llmclient.ImageURLPart("data:image/jpeg;base64,/9j/AAAA"), "image/jpeg", "/9j/AAAA", true, false},
		{"http URL", llmclient.ImageURLPart("https://example.com/cat.png"), "", "", false, false},
		{"gs URI", llmclient.ImageURLPart("gs://bucket/cat.png"), "", "", false, false},
		{"empty", llmclient.Part{Type: llmclient.PartImage}, "", "", false, true},
		{"data URL not base64", llmclient.ImageURLPart("data:image/png,abc"), "", "", false, true},
		{"data URL without type", llmclient.ImageURLPart("data:;base64,abc"), "", "", false, true},
		{"data URL without comma", llmclient.ImageURLPart("data:image/png;base64"), "", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt, data, inline, err := adapter.InlineImage(tt.part)
			if (err != nil) != tt.err || mt != tt.mt || data != tt.data || inline != tt.inline {
				t.Errorf("InlineImage = %q, %q, %v, %v; want %q, %q, %v, error %v", mt, data, inline, err, tt.mt, tt.data, tt.inline, tt.err)
			}
		})
	}
}

func FuzzInlineImage(f *testing.F) {
	f.Add("data:image/png;base64,AAAA")
	f.Add("data:,")
	f.Add("https://x/y.png")
	f.Add("data:a;b;base64,c,d")
	f.Fuzz(func(t *testing.T, url string) {
		mt, data, inline, err := adapter.InlineImage(llmclient.ImageURLPart(url))
		if err != nil && inline {
			t.Fatal("inline with an error")
		}
		if inline && (mt == "" || !strings.HasPrefix(url, "data:") || !strings.HasSuffix(url, data)) {
			t.Fatalf("%q -> %q, %q", url, mt, data)
		}
	})
}
