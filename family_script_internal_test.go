package llmclient

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// scriptOfBytewise is scriptOf one byte at a time: what the eight-byte scan must count.
func scriptOfBytewise(req *Request) int { return pickScript(scriptCountsBytewise(req)) }

// scriptCountsBytewise is scriptCounts one byte at a time.
func scriptCountsBytewise(req *Request) (ascii, cjk, other int) {
	budget := scriptSample
	for i := range req.Messages {
		for j := range req.Messages[i].Content {
			p := &req.Messages[i].Content[j]
			if p.Type == PartImage || p.Text == "" {
				continue
			}
			s := p.Text[:min(len(p.Text), scriptPart, budget)]
			budget -= len(s)
			for k := 0; k < len(s); k++ {
				switch b := s[k]; {
				case b < 0x80:
					ascii++
				case b >= 0xE3 && b <= 0xED:
					cjk++
				case b >= 0xC2 && b <= 0xDF:
					other++
				}
			}
			if budget == 0 {
				return ascii, cjk, other
			}
		}
	}
	return ascii, cjk, other
}

// TestScriptOfCountsEveryByte checks scriptOf against a byte-at-a-time count on texts that
// mix ASCII runs of every length with two- and three-byte characters, so that the class
// decided near a tie depends on every byte counted.
func TestScriptOfCountsEveryByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "hello ", "0123456789abcdef", "é", "ß", "日本", "한국어", "Ж", "\u3000", "{\"x\":1}"}
	var counts [numScripts]int
	for range 3000 {
		var msgs []Message
		for range 1 + rng.IntN(3) {
			var b strings.Builder
			for range rng.IntN(40) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
			msgs = append(msgs, Message{Role: RoleUser, Content: []Part{TextPart(b.String())}})
		}
		req := &Request{Messages: msgs}
		a, c, o := scriptCounts(req)
		if wa, wc, wo := scriptCountsBytewise(req); a != wa || c != wc || o != wo {
			t.Fatalf("scriptCounts = %d, %d, %d, counted byte by byte %d, %d, %d, for %+v", a, c, o, wa, wc, wo, msgs)
		}
		got, want := scriptOf(req), scriptOfBytewise(req)
		if got != want {
			t.Fatalf("scriptOf = %d, counted byte by byte %d, for %+v", got, want, msgs)
		}
		counts[got]++
	}
	for s, n := range counts {
		if n == 0 {
			t.Errorf("no text classified as script %d: the texts do not exercise every class", s)
		}
	}
}
