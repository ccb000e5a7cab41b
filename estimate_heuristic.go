package llmclient

import "math/bits"

// The heuristic estimator walks the text once, byte by byte, and splits it the way the
// pre-tokenizer of OpenAI's BPE encodings does (words with one leading space or punctuation
// character, digit groups of three, punctuation runs with their trailing newlines, whitespace
// runs). Each piece costs what pieces of its shape cost on average, measured with tiktoken
// on a development corpus of English prose, technical prose, Go source and JSON (see
// BENCHMARKS.md). Chinese, Japanese and Korean characters cost what they cost alone in the
// model's encoding (a two-bit table per character, estimate_cjk_table.go) times the share
// that survives the merging of common words, measured per script. A 2% margin is added, and
// costs are kept in 64ths of a token so the walk is integer-only.

// heuristicParams are the per-encoding weights of the heuristic, in 64ths of a token.
type heuristicParams struct {
	// cjk is the encoding's CJK table (estimate_cjk_table.go): for each kana, ideograph
	// and Hangul syllable, the tokens it costs alone, minus one.
	cjk string
	// cjkCost is what a kana, an ideograph and a Hangul syllable cost by their entry in
	// cjk: less than their tokens alone, because common words merge into one token.
	cjkCost  [3][4]uint16
	wordBase uint16 // a word of multi-byte letters only, before its letters
	latinExt uint16 // two-byte letters: accented Latin, Greek, Cyrillic, Hebrew, Arabic
	other3   uint16 // other three-byte letters (Indic, Thai, Yi, rare CJK blocks)
	cjkPunct uint16 // CJK and full-width punctuation
	symbol   uint16 // general punctuation and symbols (U+2000..U+2FFF, Latin-1 symbols)
	emoji    uint16 // four-byte characters outside the CJK extension planes
}

var (
	// paramsCL100k are the weights for cl100k_base (GPT-4, GPT-3.5).
	paramsCL100k = heuristicParams{cjk: cjkTokensCL100k, cjkCost: cjkCosts(0.98, 1.0, 1.0),
		latinExt: 32, other3: 80, cjkPunct: 64, symbol: 68, emoji: 192}
	// paramsO200k are the weights for o200k_base (GPT-4o, GPT-4.1, o-series, GPT-5) and the
	// default for models of other vendors.
	paramsO200k = heuristicParams{cjk: cjkTokensO200k, cjkCost: cjkCosts(0.86, 0.84, 0.86),
		latinExt: 24, other3: 32, cjkPunct: 40, symbol: 68, emoji: 128}
)

// cjkCosts returns the CJK costs for the given ratios of tokens in text to tokens alone, for
// kana, ideographs and Hangul.
func cjkCosts(kana, han, hangul float64) (c [3][4]uint16) {
	for i, f := range [3]float64{kana, han, hangul} {
		for n := range c[i] {
			c[i][n] = uint16(f*64*float64(n+1) + 0.5)
		}
	}
	return c
}

// Byte classes of the walk.
const (
	bPunct   = iota // ASCII punctuation and control characters
	bLower          // a-z
	bUpper          // A-Z
	bDigit          // 0-9
	bSpace          // ' '
	bBlank          // '\t', '\v', '\f'
	bNewline        // '\n', '\r'
	bLead2          // lead byte of a two-byte sequence
	bLead3          // lead byte of a three-byte sequence
	bLead4          // lead byte of a four-byte sequence
	bInvalid        // continuation byte out of place, or a byte that never occurs in UTF-8
)

var byteClass = func() (t [256]uint8) {
	for i := range t {
		b := byte(i)
		switch {
		case b >= 'a' && b <= 'z':
			t[i] = bLower
		case b >= 'A' && b <= 'Z':
			t[i] = bUpper
		case b >= '0' && b <= '9':
			t[i] = bDigit
		case b == ' ':
			t[i] = bSpace
		case b == '\t' || b == '\v' || b == '\f':
			t[i] = bBlank
		case b == '\n' || b == '\r':
			t[i] = bNewline
		case b < 0x80:
			t[i] = bPunct
		case b >= 0xC2 && b <= 0xDF:
			t[i] = bLead2
		case b >= 0xE0 && b <= 0xEF:
			t[i] = bLead3
		case b >= 0xF0 && b <= 0xF4:
			t[i] = bLead4
		default:
			t[i] = bInvalid
		}
	}
	return t
}()

// wordCost is the cost of an ASCII word piece by its prefix (none, one space, one other
// character), its case (lower, Title, UPPER, a single capital) and its length up to 16
// letters; longer words add a quarter token per letter. Measured with tiktoken as the
// larger of the cl100k_base and o200k_base means, made non-decreasing in the length.
var wordCost = [3][4][17]uint16{
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

// wordCostFlat is wordCost in one array whose size lets the index be masked instead of
// bounds-checked.
var wordCostFlat = func() (t [256]uint16) {
	for p := range wordCost {
		for c := range wordCost[p] {
			for n, v := range wordCost[p][c] {
				t[(p*4+c)*17+n] = v
			}
		}
	}
	return t
}()

// punctCost is the cost of an ASCII punctuation run by its leading space, its trailing
// newlines (none, one, more) and its length up to 8, at [space*27 + newlines*9 + length];
// longer runs add half a token per character. The array is padded to 64 entries so that
// the index can be masked instead of bounds-checked.
var punctCost = [64]uint16{
	0, 64, 64, 68, 84, 140, 140, 192, 224, // no space, no newline
	0, 64, 68, 80, 100, 132, 164, 196, 228, // no space, one newline
	0, 64, 88, 92, 140, 188, 220, 220, 252, // no space, more newlines
	0, 64, 64, 76, 120, 152, 184, 216, 248, // space, no newline
	0, 64, 64, 72, 100, 132, 164, 196, 228, // space, one newline
	0, 64, 96, 128, 160, 192, 224, 256, 288, // space, more newlines
}

// letterAt reports the cost of the multi-byte character at s[i] when it is a letter, and
// its length; the cost is 0 when it is not a letter. s[i] must be a lead byte.
func (p *heuristicParams) letterAt(s string, i int) (cost uint16, size int) {
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

// symbolAt returns the cost and length of the multi-byte non-letter character at s[i].
func (p *heuristicParams) symbolAt(s string, i int) (cost uint16, size int) {
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

// hanAt returns the cost of the CJK ideograph (lead byte E4..E9) at s[i:i+3].
func (p *heuristicParams) hanAt(s string, i int) uint16 {
	r := int(s[i]&0x0F)<<12 | int(s[i+1]&0x3F)<<6 | int(s[i+2]&0x3F)
	if r < 0x4E00 { // extension A
		return p.cjkCost[1][1]
	}
	idx := 192 + r - 0x4E00
	return p.cjkCost[1][p.cjk[idx>>2]>>((idx&3)*2)&3]
}

// isLetterAt reports whether s[i] starts a letter (ASCII or multi-byte).
func (p *heuristicParams) isLetterAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	switch byteClass[s[i]] {
	case bLower, bUpper:
		return true
	case bLead2, bLead3, bLead4:
		c, _ := p.letterAt(s, i)
		return c != 0
	}
	return false
}

// count returns the estimated number of tokens of s. Every piece is handled inline, and
// the ASCII letters of a word are scanned eight at a time: this loop is the estimator's
// whole cost.
func (p *heuristicParams) count(s string) int {
	var sum uint64 // 64ths of a token
	n := len(s)
	i := 0
	for i < n {
		prefix, space := 0, 0
		// The commonest piece, a space and a lower-case word, skips the dispatch.
		if s[i] == ' ' && i+1 < n && s[i+1]-'a' < 26 {
			prefix = 1
			i++
			goto word
		}
		switch byteClass[s[i]] {
		case bLower, bUpper:
			// a word without prefix
		case bSpace:
			if i+1 < n {
				switch byteClass[s[i+1]] {
				case bLower, bUpper:
					prefix = 1
					i++
				case bPunct:
					space = 1
					i++
					goto punct
				case bLead2, bLead3, bLead4:
					if c, _ := p.letterAt(s, i+1); c != 0 {
						prefix = 1
						i++
					}
				}
			}
			if prefix == 0 {
				goto blank
			}
		case bPunct:
			if i+1 < n {
				if k := byteClass[s[i+1]]; k == bLower || k == bUpper || (k >= bLead2 && k <= bLead4 && p.isLetterAt(s, i+1)) {
					prefix = 2
					i++
					break
				}
			}
			goto punct
		case bDigit:
			{
				j := i + 1
				for j < n && s[j]-'0' < 10 {
					j++
				}
				sum += uint64((j-i+2)/3) * 64
				i = j
			}
			continue
		case bBlank:
			// An ASCII letter (bLower or bUpper; the class is unsigned) is tested
			// first, to save the call.
			if i+1 < n && (byteClass[s[i+1]]-bLower < 2 || p.isLetterAt(s, i+1)) {
				prefix = 2
				i++
				break
			}
			goto blank
		case bNewline:
			goto blank
		case bLead2, bLead3, bLead4:
			if b := s[i]; b >= 0xE4 && b <= 0xE9 {
				break // a CJK ideograph: a word
			}
			if c, _ := p.letterAt(s, i); c == 0 {
				c, size := p.symbolAt(s, i)
				sum += uint64(c)
				i += size
				continue
			}
		default: // bInvalid
			sum += 64
			i++
			continue
		}

		// A word: letters from s[i], split where a lower-case letter meets a capital:
		// capitals first (a Title or UPPER word), then lower-case and multi-byte letters.
	word:
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
						k := bits.TrailingZeros64(^bytesIn(load8(s, i), 'a', 'z')&hi8) >> 3
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
					mb += uint64(p.hanAt(s, i))
					mbBytes += 3
					i += 3
					continue
				}
				cost, size := p.letterAt(s, i)
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
			sum += uint64(wordCostFlat[((prefix*4+c)*17+letters)&255]) + mb
		}
		continue

	punct: // a run of ASCII punctuation from s[i] (after a space when space is 1), with its
		// trailing newlines
		{
			j := i + 1
			for j < n && byteClass[s[j]] == bPunct {
				j++
			}
			run := j - i
			nl := 0
			for j < n && byteClass[s[j]] == bNewline {
				j++
				nl++
			}
			if run > 8 {
				sum += uint64(run-8) * 32
				run = 8
			}
			sum += uint64(punctCost[(space*27+min(nl, 2)*9+run)&63])
			i = j
		}
		continue

	blank:
		i, sum = p.blankRun(s, i, sum)
	}
	// A 2% margin: undercounting admits more than the quota, overcounting only a little less.
	sum += sum / 50
	if sum < 64 && n > 0 { // any text is at least one token
		return 1
	}
	return int((sum + 32) / 64)
}

// hi8 has the high bit of each of eight bytes, lo8 the low bit.
const (
	hi8 = 0x8080808080808080
	lo8 = 0x0101010101010101
)

// load8 returns s[i:i+8] as a little-endian word. Slicing first leaves one bounds check
// and lets the compiler merge the eight byte loads into one.
func load8(s string, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// The masks below have the high bit of each byte of x that is in a set, and no other bit.
// Setting the high bit of every byte before subtracting keeps each byte's borrow inside it.

// bytesIn marks the bytes from lo to hi; lo and hi are ASCII.
func bytesIn(x uint64, lo, hi byte) uint64 {
	y := x | hi8
	return (y - lo8*uint64(lo)) &^ (y - lo8*uint64(hi+1)) &^ x & hi8
}

// blankBytes marks whitespace: ' ', '\t', '\n', '\v', '\f' and '\r' (bSpace, bBlank and
// bNewline).
func blankBytes(x uint64) uint64 { return bytesIn(x, '\t', '\r') | bytesIn(x, ' ', ' ') }

// newlineBytes marks '\n' and '\r' (bNewline).
func newlineBytes(x uint64) uint64 { return bytesIn(x, '\n', '\n') | bytesIn(x, '\r', '\r') }

// blankRun consumes a run of whitespace starting at s[i] and adds its cost: one token up
// to the last newline, one for the blanks after it. The last blank is left to a following
// word (any blank) or punctuation run (a space), as the pre-tokenizer does.
func (p *heuristicParams) blankRun(s string, i int, sum uint64) (int, uint64) {
	j, lastNL := i, -1
	for {
		if j+8 > len(s) {
			for j < len(s) {
				k := byteClass[s[j]]
				if k == bNewline {
					lastNL = j
				} else if k != bSpace && k != bBlank {
					break
				}
				j++
			}
			break
		}
		// Eight bytes at a time: the whitespace before the first other byte, and the
		// last newline among it.
		x := load8(s, j)
		k := bits.TrailingZeros64(^blankBytes(x)&hi8) >> 3
		if nl := newlineBytes(x) & (uint64(1)<<(k*8) - 1); nl != 0 {
			lastNL = j + (63-bits.LeadingZeros64(nl))>>3
		}
		j += k
		if k < 8 {
			break
		}
	}
	end := j
	if j < len(s) && end-1 > lastNL {
		last := s[end-1]
		k := byteClass[s[j]] // an ASCII letter first, to save the call
		if k-bLower < 2 || (last == ' ' && k == bPunct) || (k >= bLead2 && p.isLetterAt(s, j)) {
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
