package llmclient

import (
	"math/bits"
	"strings"
)

// This file is a frozen copy of the heuristic's walk as it was before its speed-up
// (estimate_heuristic.go at the time): countReference and its helpers and tables, renamed
// with a ref prefix. estimate_equiv_test.go checks that the optimised count returns exactly
// what this copy returns. Do not optimise or "fix" this file: its only job is to stay the
// same; if the heuristic's weights or rules change on purpose, refresh the copy with them.

// Byte classes of the walk.
const (
	rbPunct   = iota // ASCII punctuation and control characters
	rbLower          // a-z
	rbUpper          // A-Z
	rbDigit          // 0-9
	rbSpace          // ' '
	rbBlank          // '\t', '\v', '\f'
	rbNewline        // '\n', '\r'
	rbLead2          // lead byte of a two-byte sequence
	rbLead3          // lead byte of a three-byte sequence
	rbLead4          // lead byte of a four-byte sequence
	rbInvalid        // continuation byte out of place, or a byte that never occurs in UTF-8
)

var refByteClass = func() (t [256]uint8) {
	for i := range t {
		b := byte(i)
		switch {
		case b >= 'a' && b <= 'z':
			t[i] = rbLower
		case b >= 'A' && b <= 'Z':
			t[i] = rbUpper
		case b >= '0' && b <= '9':
			t[i] = rbDigit
		case b == ' ':
			t[i] = rbSpace
		case b == '\t' || b == '\v' || b == '\f':
			t[i] = rbBlank
		case b == '\n' || b == '\r':
			t[i] = rbNewline
		case b < 0x80:
			t[i] = rbPunct
		case b >= 0xC2 && b <= 0xDF:
			t[i] = rbLead2
		case b >= 0xE0 && b <= 0xEF:
			t[i] = rbLead3
		case b >= 0xF0 && b <= 0xF4:
			t[i] = rbLead4
		default:
			t[i] = rbInvalid
		}
	}
	return t
}()

// refWordCost is the cost of an ASCII word piece by its prefix (none, one space, one other
// character), its case (lower, Title, UPPER, a single capital) and its length up to 16
// letters; longer words add a quarter token per letter. Measured with tiktoken as the
// larger of the cl100k_base and o200k_base means, made non-decreasing in the length.
var refWordCost = [3][4][17]uint16{
	{ // no prefix
		{0, 64, 64, 72, 72, 72, 72, 72, 80, 80, 88, 116, 136, 192, 208, 224, 224},
		{0, 64, 76, 88, 88, 88, 88, 88, 88, 88, 88, 96, 112, 120, 128, 144, 160},
		{0, 64, 64, 76, 84, 140, 140, 140, 156, 172, 188, 204, 220, 236, 252, 268, 284},
		{0, 64},
	},
	{ // one space
		{0, 64, 64, 64, 64, 68, 68, 68, 68, 72, 72, 72, 72, 72, 76, 76, 92},
		{0, 64, 64, 64, 64, 68, 68, 72, 96, 96, 96, 116, 116, 116, 132, 148, 164},
		{0, 64, 64, 72, 72, 108, 124, 124, 140, 156, 172, 188, 204, 220, 236, 252, 268},
		{0, 64},
	},
	{ // one punctuation or blank character
		{0, 64, 76, 76, 84, 88, 88, 100, 120, 120, 124, 164, 180, 196, 212, 228, 252},
		{0, 64, 68, 76, 80, 88, 88, 96, 96, 132, 132, 132, 220, 236, 252, 268, 284},
		{0, 64, 96, 96, 96, 132, 132, 132, 132, 148, 164, 180, 196, 212, 228, 244, 260},
		{0, 72},
	},
}

// refWordCostFlat is refWordCost in one array whose size lets the index be masked instead of
// bounds-checked.
var refWordCostFlat = func() (t [256]uint16) {
	for p := range refWordCost {
		for c := range refWordCost[p] {
			for n, v := range refWordCost[p][c] {
				t[(p*4+c)*17+n] = v
			}
		}
	}
	return t
}()

// refPunctCost is the cost of an ASCII punctuation run by its leading space, its trailing
// newlines (none, one, more) and its length up to 8, at [space*27 + newlines*9 + length];
// longer runs add half a token per character.
var refPunctCost = [54]uint16{
	0, 64, 64, 68, 84, 140, 140, 192, 224, // no space, no newline
	0, 64, 68, 80, 100, 132, 164, 196, 228, // no space, one newline
	0, 64, 88, 92, 140, 188, 220, 220, 252, // no space, more newlines
	0, 64, 64, 76, 120, 152, 184, 216, 248, // space, no newline
	0, 64, 64, 72, 100, 132, 164, 196, 228, // space, one newline
	0, 64, 96, 128, 160, 192, 224, 256, 288, // space, more newlines
}

// refLetterAt reports the cost of the multi-byte character at s[i] when it is a letter, and
// its length; the cost is 0 when it is not a letter. s[i] must be a lead byte.
func (p *heuristicParams) refLetterAt(s string, i int) (cost uint16, size int) {
	b := s[i]
	switch {
	case b < 0xC3: // C2: Latin-1 symbols and no-break space
		return 0, 2
	case b < 0xE0:
		return p.latinExt, 2
	case b < 0xE2:
		return p.other3, 3
	case b == 0xE2:
		return 0, 3
	case b <= 0xED:
		if i+2 >= len(s) {
			return p.cjkCost[1][1], 3
		}
		r := int(b&0x0F)<<12 | int(s[i+1]&0x3F)<<6 | int(s[i+2]&0x3F)
		var idx, script int
		switch {
		case r < 0x3040: // CJK symbols and punctuation
			return 0, 3
		case r <= 0x30FF:
			idx = r - 0x3040
		case r < 0x4E00: // Bopomofo, compatibility Jamo, extension A
			return p.cjkCost[1][1], 3
		case r <= 0x9FFF:
			idx, script = 192+r-0x4E00, 1
		case r < 0xAC00, r > 0xD7A3: // Yi, Lisu, Vai, ...; surrogates
			return p.other3, 3
		default:
			idx, script = 21184+r-0xAC00, 2
		}
		return p.cjkCost[script][p.cjk[idx>>2]>>((idx&3)*2)&3], 3
	case b <= 0xEF:
		return 0, 3
	case i+1 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xAF: // CJK extension planes
		return p.cjkCost[1][1], 4
	}
	return 0, 4
}

// refSymbolAt returns the cost and length of the multi-byte non-letter character at s[i].
func (p *heuristicParams) refSymbolAt(s string, i int) (cost uint16, size int) {
	switch b := s[i]; {
	case b < 0xE0:
		return p.symbol, 2
	case b == 0xE3 || (b == 0xEF && i+1 < len(s) && (s[i+1] == 0xBC || s[i+1] == 0xBD)):
		return p.cjkPunct, 3
	case b < 0xF0:
		return p.symbol, 3
	}
	return p.emoji, 4
}

// refHanAt returns the cost of the CJK ideograph (lead byte E4..E9) at s[i:i+3].
func (p *heuristicParams) refHanAt(s string, i int) uint16 {
	r := int(s[i]&0x0F)<<12 | int(s[i+1]&0x3F)<<6 | int(s[i+2]&0x3F)
	if r < 0x4E00 { // extension A
		return p.cjkCost[1][1]
	}
	idx := 192 + r - 0x4E00
	return p.cjkCost[1][p.cjk[idx>>2]>>((idx&3)*2)&3]
}

// refIsLetterAt reports whether s[i] starts a letter (ASCII or multi-byte).
func (p *heuristicParams) refIsLetterAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	switch refByteClass[s[i]] {
	case rbLower, rbUpper:
		return true
	case rbLead2, rbLead3, rbLead4:
		c, _ := p.refLetterAt(s, i)
		return c != 0
	}
	return false
}

// countReference returns the estimated number of tokens of s. Every piece is handled inline, and
// the ASCII letters of a word are scanned eight at a time: this loop is the estimator's
// whole cost.
func (p *heuristicParams) countReference(s string) int {
	var sum uint64 // 64ths of a token
	n := len(s)
	i := 0
	for i < n {
		prefix, space := 0, 0
		switch refByteClass[s[i]] {
		case rbLower, rbUpper:
			// a word without prefix
		case rbSpace:
			if i+1 < n {
				switch refByteClass[s[i+1]] {
				case rbLower, rbUpper:
					prefix = 1
					i++
				case rbPunct:
					space = 1
					i++
					goto punct
				case rbLead2, rbLead3, rbLead4:
					if c, _ := p.refLetterAt(s, i+1); c != 0 {
						prefix = 1
						i++
					}
				}
			}
			if prefix == 0 {
				goto blank
			}
		case rbPunct:
			if i+1 < n {
				if k := refByteClass[s[i+1]]; k == rbLower || k == rbUpper || (k >= rbLead2 && k <= rbLead4 && p.refIsLetterAt(s, i+1)) {
					prefix = 2
					i++
					break
				}
			}
			goto punct
		case rbDigit:
			{
				j := i + 1
				for j < n && s[j]-'0' < 10 {
					j++
				}
				sum += uint64((j-i+2)/3) * 64
				i = j
			}
			continue
		case rbBlank:
			if p.refIsLetterAt(s, i+1) {
				prefix = 2
				i++
				break
			}
			goto blank
		case rbNewline:
			goto blank
		case rbLead2, rbLead3, rbLead4:
			if b := s[i]; b >= 0xE4 && b <= 0xE9 {
				break // a CJK ideograph: a word
			}
			if c, _ := p.refLetterAt(s, i); c == 0 {
				c, size := p.refSymbolAt(s, i)
				sum += uint64(c)
				i += size
				continue
			}
		default: // rbInvalid
			sum += 64
			i++
			continue
		}

		// A word: letters from s[i], split where a lower-case letter meets a capital:
		// capitals first (a Title or UPPER word), then lower-case and multi-byte letters.
		{
			start := i
			firstUpper := s[i]-'A' < 26
			upper, mbBytes := 0, 0
			var mb uint64
			for i < n && s[i]-'A' < 26 {
				upper++
				i++
			}
			for {
				if i < n && s[i]-'a' < 26 {
					for i++; ; {
						if i+8 > n {
							for i < n && s[i]-'a' < 26 {
								i++
							}
							break
						}
						// How many of the next eight bytes are lower-case letters.
						_ = s[i+7]
						x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
							uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
						y := x | refHi8
						lower := (y - 0x6161616161616161) &^ (y - 0x7b7b7b7b7b7b7b7b) &^ x & refHi8
						k := bits.TrailingZeros64(^lower&refHi8) >> 3
						i += k
						if k < 8 {
							break
						}
					}
				}
				if i >= n || s[i] < 0x80 {
					break
				}
				if c := s[i]; c >= 0xE4 && c <= 0xE9 && i+2 < n { // CJK ideographs, the common case
					mb += uint64(p.refHanAt(s, i))
					mbBytes += 3
					i += 3
					continue
				}
				cost, size := p.refLetterAt(s, i)
				if cost == 0 {
					break
				}
				size = min(size, n-i)
				mb += uint64(cost)
				mbBytes += size
				i += size
			}
			letters := i - start - mbBytes
			if letters == 0 {
				sum += uint64(p.wordBase) + mb
				continue
			}
			lower := letters - upper
			c := 0 // lower
			switch {
			case lower == 0 && upper == 1:
				c = 3
			case lower == 0:
				c = 2
			case firstUpper:
				c = 1
			}
			if letters > 16 {
				sum += uint64(letters-16) * 16
				letters = 16
				if c == 3 {
					c = 2
				}
			}
			sum += uint64(refWordCostFlat[(prefix*4+c)*17+letters&255]) + mb
		}
		continue

	punct: // a run of ASCII punctuation from s[i] (after a space when space is 1), with its
		// trailing newlines
		{
			j := i + 1
			for j < n && refByteClass[s[j]] == rbPunct {
				j++
			}
			run := j - i
			nl := 0
			for j < n && refByteClass[s[j]] == rbNewline {
				j++
				nl++
			}
			if run > 8 {
				sum += uint64(run-8) * 32
				run = 8
			}
			sum += uint64(refPunctCost[space*27+min(nl, 2)*9+run])
			i = j
		}
		continue

	blank:
		i, sum = p.refBlankRun(s, i, sum)
	}
	// A 2% margin: undercounting admits more than the quota, overcounting only a little less.
	sum += sum / 50
	if sum < 64 && n > 0 { // any text is at least one token
		return 1
	}
	return int((sum + 32) / 64)
}

// refHi8 has the high bit of each of eight bytes.
const refHi8 = 0x8080808080808080

// refBlankRun consumes a run of whitespace starting at s[i] and adds its cost: one token up
// to the last newline, one for the blanks after it. The last blank is left to a following
// word (any blank) or punctuation run (a space), as the pre-tokenizer does.
func (p *heuristicParams) refBlankRun(s string, i int, sum uint64) (int, uint64) {
	j, lastNL := i, -1
	for j < len(s) {
		k := refByteClass[s[j]]
		if k == rbNewline {
			lastNL = j
		} else if k != rbSpace && k != rbBlank {
			break
		}
		j++
	}
	end := j
	if j < len(s) && end-1 > lastNL {
		last := s[end-1]
		if p.refIsLetterAt(s, j) || (last == ' ' && refByteClass[s[j]] == rbPunct) {
			end--
		}
	}
	if lastNL >= 0 {
		sum += 64
		i = lastNL + 1
	}
	if end > i {
		sum += 64
	}
	if end == i && lastNL < 0 { // a lone blank that a following piece did not take
		end++
		sum += 64
	}
	return end, sum
}

// encodingForModelReference is a frozen copy of EncodingForModel as it was before the
// speed-up of HeuristicEstimator.CountTokens.
func encodingForModelReference(model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	if len(model) < 5 || (model[0] != 'g' && model[0] != 't') {
		return "o200k_base"
	}
	switch {
	case strings.HasPrefix(model, "gpt-4o"), strings.HasPrefix(model, "gpt-4.1"),
		strings.HasPrefix(model, "gpt-4.5"):
		return "o200k_base"
	case strings.HasPrefix(model, "gpt-4"), strings.HasPrefix(model, "gpt-3.5"),
		strings.HasPrefix(model, "gpt-35"), strings.HasPrefix(model, "text-embedding-"):
		return "cl100k_base"
	}
	return "o200k_base"
}
