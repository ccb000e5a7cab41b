package estimate

import (
	"math/bits"
	"unicode/utf8"
)

// The heuristic estimator counts, in one pass over the text and without branching on most
// bytes, the features that decide what the pre-tokenizer of OpenAI's BPE encodings makes of
// a text (words with one leading space or punctuation character, digit groups of three,
// punctuation runs with their trailing newlines, whitespace runs) and charges each feature
// a weight, fitted with tiktoken on a tuning corpus (testdata/corpus, see its README).
//
// The text is read 64 bytes at a time: the block is transposed into its eight bit planes
// and each byte class becomes one bit per byte of a 64-bit mask (letters, capitals, digits,
// spaces, blanks, newlines, bytes above ASCII; classify.go); the features are then counted
// with shifts, ands and popcounts of those masks, carrying the last bytes of the previous
// block into the shifts. A text of one block without a byte above ASCII is weighed directly
// (short.go). reference_test.go keeps the previous implementation, which every count must
// match. Only multi-byte characters take a loop of their own: Chinese, Japanese
// and Korean characters cost the tokens they cost alone in the model's encoding (a two-bit
// table per character, cjk_table.go), less a saving for each pair of neighbours
// that the encoding has inside one of its tokens (a small hash set built from the same
// file). Weights are in 64ths of a token, so the sum is integer-only.

// Features counted by heuristicParams.features. The weights of heuristicParams.w are in
// the same order.
const (
	fWord         = iota // a word: a run of letters
	fWordBare            // a word after neither a blank nor punctuation (after a newline, a digit, a punctuation run or nothing)
	fWordDigit           // a word right after a digit, as in identifiers and hashes
	fWordMB              // a word that starts with a multi-byte letter
	fWordMBSpace         // a word that starts with a multi-byte letter, after a space
	fCaseSplit           // a capital right after a lower-case letter: o200k_base starts a word there
	fUpper3              // a capital after three or more capitals
	fLower10Space        // a lower-case letter after 10+ lower-case letters, in a word after a space
	fLower3              // a lower-case letter after 3+ lower-case letters, in a word not after a space
	fLower10             // ... after 10+
	fLower20             // ... after 20+: long runs of lower-case letters cost about a quarter token a letter
	fDigits              // a run of digits
	fDigit3              // the 4th or 7th digit of a run: a new group of three
	fDigit9              // a digit after nine or more
	fPunct               // a run of punctuation or symbols, less the single characters that a word takes as its prefix
	fPunctSpace          // a run of punctuation or symbols right after a space
	fPunct1              // ASCII punctuation right after punctuation
	fPunct2              // ASCII punctuation after two or more
	fPunct4              // ASCII punctuation after four or more
	fNewline             // a run of newlines, unless right after punctuation or a blank (which it joins)
	fNewlineAfter        // a run of newlines right after punctuation or a blank
	fBlank               // a run of blanks (space, tab, vertical tab, form feed), less single ones that a word or a punctuation run takes
	fCJK                 // the tokens that kana, ideographs and Hangul cost alone
	fCJKPair             // a CJK character that pairs with the one before it (cjkPairs)
	fLatinExt            // a two-byte letter (accented Latin, Greek, Cyrillic, Hebrew, Arabic)
	fOther3              // another three-byte letter (Indic, Thai, Yi, ...)
	fCJKPunct            // a CJK or full-width punctuation character
	fSymbol              // a multi-byte symbol (general punctuation, arrows, Latin-1 symbols)
	fEmoji               // a four-byte character outside the CJK extension planes
	fInvalid             // a byte that is not part of a valid UTF-8 sequence
	nFeatures
)

// heuristicParams are the per-encoding data of the heuristic.
type heuristicParams struct {
	// cjk is the encoding's CJK table (cjk_table.go): for each kana, ideograph
	// and Hangul syllable, the tokens it costs alone, minus one.
	cjk string
	// pairs is the set of the encoding's CJK pairs (cjkPairsO200k, cjkPairsCL100k).
	pairs pairSet
	// w are the features' weights in 64ths of a token.
	w [nFeatures]int64
}

var (
	// paramsCL100k are the weights for cl100k_base (GPT-4, GPT-3.5).
	paramsCL100k = heuristicParams{cjk: cjkTokensCL100k, pairs: newPairSet(cjkPairsCL100k), w: weightsCL100k}
	// paramsO200k are the weights for o200k_base (GPT-4o, GPT-4.1, o-series, GPT-5) and the
	// default for models of other vendors.
	paramsO200k = heuristicParams{cjk: cjkTokensO200k, pairs: newPairSet(cjkPairsO200k), w: weightsO200k}
)

// The weights of the features in 64ths of a token, fitted by least squares with tiktoken
// on the tuning corpus (../testdata/corpus/README.md), per encoding. Weights of word lengths
// are kept non-negative; a feature the corpus barely has keeps its prior (Other3, Digit9,
// Invalid). Refit with: go test -run TestFitHeuristicWeights -fit -v .
var (
	weightsO200k = [nFeatures]int64{
		fWord: 65, fWordBare: -20, fWordDigit: 17, fWordMB: -90, fWordMBSpace: 2, fCaseSplit: 69,
		fUpper3: 20, fLower10Space: 18, fLower3: 10, fLower10: 30, fLower20: -24, fDigits: 64,
		fDigit3: 64, fDigit9: 21, fPunct: 67, fPunctSpace: 6, fPunct1: -7, fPunct2: 13, fPunct4: 6,
		fNewline: 85, fNewlineAfter: -17, fBlank: 78, fCJK: 67, fCJKPair: -59, fLatinExt: 26,
		fOther3: 32, fCJKPunct: 9, fSymbol: -3, fEmoji: 86, fInvalid: 64,
	}
	weightsCL100k = [nFeatures]int64{
		fWord: 65, fWordBare: -14, fWordDigit: 11, fWordMB: -72, fWordMBSpace: 6, fCaseSplit: 73,
		fUpper3: 20, fLower10Space: 19, fLower3: 8, fLower10: 32, fLower20: -24, fDigits: 64,
		fDigit3: 64, fDigit9: 21, fPunct: 70, fPunctSpace: -4, fPunct1: -3, fPunct2: 4, fPunct4: 13,
		fNewline: 92, fNewlineAfter: -8, fBlank: 72, fCJK: 64, fCJKPair: -64, fLatinExt: 50, fOther3: 32,
		fCJKPunct: 12, fSymbol: 13, fEmoji: 92, fInvalid: 64,
	}
)

// count returns the estimated number of tokens of s. A text of one block (a chat message,
// a name, a tool call's id) with no byte above ASCII has a path of its own, asciiBlockSum,
// which weighs its features directly.
func (p *heuristicParams) count(s string) int {
	if len(s) < 64 {
		if s == "" {
			return 0
		}
		var b block
		if classifyTail(&b, s, 0); b.high == 0 {
			return tokens(p.asciiBlockSum(&b, uint64(1)<<len(s)-1))
		}
	}
	return p.countBlocks(s)
}

// countBlocks is count for a text of more than one block or with bytes above ASCII.
func (p *heuristicParams) countBlocks(s string) int {
	var f [nFeatures]int
	p.features(s, &f)
	return tokens(p.weigh(&f))
}

// weigh returns the weighted sum of the features f, in 64ths of a token.
func (p *heuristicParams) weigh(f *[nFeatures]int) int64 {
	var sum int64
	for i, n := range f {
		sum += p.w[i] * int64(n)
	}
	return sum
}

// tokens returns the estimate for a weighted sum of features, in 64ths of a token: at
// least one token, with a 3% margin (undercounting admits more than the quota,
// overcounting only a little less).
func tokens(sum int64) int {
	sum += sum * 3 / 100
	if sum < 64 { // any text is at least one token
		return 1
	}
	return int((sum + 32) / 64)
}

// carry is what a block passes on to the next: its masks, for shifts across the boundary,
// and the state of the multi-byte characters.
type carry struct {
	letter, lower, upper, pu, space, blank, newline uint64
	digit, digitStart, d1, d2, d4                   uint64
	l1, l2, l4, l10, u1, p1, p2                     uint64
	fill                                            uint64 // 1: the last byte is in a word after a space
	// Multi-byte characters.
	mbLetter, mbSymbol uint64 // bytes of the next block that belong to a character of this one
	cjkPrev            int    // table index of the CJK character that ends where cjkEnd is, or -1
	cjkEnd             int
}

// shl shifts x left by k (1..63) bits, filling in the top bits of prev.
func shl(x, prev uint64, k uint) uint64 { return x<<k | prev>>(64-k) }

// features adds to f the features of s.
func (p *heuristicParams) features(s string, f *[nFeatures]int) {
	c := carry{cjkPrev: -1, cjkEnd: -1}
	for i := 0; i < len(s); i += 64 {
		var b block
		valid := ^uint64(0)
		if len(s)-i >= 64 {
			classify(&b, s, i)
		} else {
			classifyTail(&b, s, i)
			valid = uint64(1)<<(len(s)-i) - 1
		}
		p.addBlock(s, i, &b, valid, &c, f)
	}
}

// addBlock adds the features of the block of s at i, whose bytes are those of valid.
//
// It goes feature group by feature group (digits, capitals, lower-case runs, words,
// punctuation, whitespace) and stores each carry as soon as its group no longer needs the
// previous block's value, so that few masks are alive at once: with all of them alive to
// the end, most would live on the stack.
func (p *heuristicParams) addBlock(s string, i int, b *block, valid uint64, c *carry, f *[nFeatures]int) {
	var mbLetter, mbSymbol uint64
	if b.high|c.mbLetter|c.mbSymbol != 0 {
		mbLetter, mbSymbol = p.multiByte(s, i, b.high, c, f)
	}

	// Digits: groups of three.
	digit := b.digit
	pDigit := shl(digit, c.digit, 1)
	dStart := digit &^ pDigit
	d1 := digit & pDigit
	d2 := d1 & shl(d1, c.d1, 1)
	d3 := d2 & shl(d1, c.d1, 2)
	d4 := d2 & shl(d2, c.d2, 2)
	d6 := d4 & shl(d2, c.d2, 4)
	d8 := d4 & shl(d4, c.d4, 4)
	d9 := d8 & shl(d1, c.d1, 8)
	f[fDigits] += bits.OnesCount64(dStart)
	f[fDigit3] += bits.OnesCount64(shl(dStart, c.digitStart, 3)&d3 | shl(dStart, c.digitStart, 6)&d6)
	f[fDigit9] += bits.OnesCount64(d9)
	c.digit, c.digitStart, c.d1, c.d2, c.d4 = digit, dStart, d1, d2, d4

	// Capitals.
	upper := b.upper
	lower := b.letter &^ upper
	pLower := shl(lower, c.lower, 1)
	f[fCaseSplit] += bits.OnesCount64(upper & pLower)
	u1 := upper & shl(upper, c.upper, 1)
	u2 := u1 & shl(u1, c.u1, 1)
	u3 := u2 & shl(u1, c.u1, 2)
	f[fUpper3] += bits.OnesCount64(u3)
	c.upper, c.u1 = upper, u1

	// Runs of lower-case letters, counted below once the words after a space are known.
	l1 := lower & pLower
	l2 := l1 & shl(l1, c.l1, 1)
	l3 := l2 & shl(l1, c.l1, 2)
	l4 := l2 & shl(l2, c.l2, 2)
	l8 := l4 & shl(l4, c.l4, 4)
	l10 := l8 & shl(l2, c.l2, 8)
	l20 := l10 & shl(l10, c.l10, 10)
	c.lower, c.l1, c.l2, c.l4, c.l10 = lower, l1, l2, l4, l10

	// Words.
	letter := b.letter | mbLetter
	space := b.space
	newline := b.newline
	blank := (b.blank &^ newline) | space
	punct := valid &^ (b.letter | digit | b.blank | b.space | b.high) // ASCII punctuation and controls
	pu := punct | mbSymbol                                            // any punctuation or symbol
	pLetter := shl(letter, c.letter, 1)
	pSpace := shl(space, c.space, 1)
	pBlank := shl(blank, c.blank, 1)
	pPU := shl(pu, c.pu, 1)
	ppPU := shl(pu, c.pu, 2)
	ppSpace := shl(space, c.space, 2)
	ppBlank := shl(blank, c.blank, 2)
	c.letter, c.space, c.blank, c.pu = letter, space, blank, pu
	start := letter &^ pLetter
	f[fWord] += bits.OnesCount64(start)
	onePunct := pPU &^ ppPU &^ ppSpace // one punctuation character after neither punctuation nor a space
	prefixed := start & (pBlank | onePunct)
	f[fWordBare] += bits.OnesCount64(start &^ prefixed)
	f[fWordDigit] += bits.OnesCount64(start & pDigit)
	if mbLetter != 0 { // a branch that ASCII text and CJK text predict alike
		mbStart := start & mbLetter
		f[fWordMB] += bits.OnesCount64(mbStart)
		f[fWordMBSpace] += bits.OnesCount64(mbStart & pSpace)
	}

	// Letters of words after a space: the runs of letters that contain such a start. Adding
	// a run's lowest bit carries through the run; the carry out of bit 63 goes on in the
	// next block.
	sum, carryOut := bits.Add64(letter, start&pSpace, c.fill&letter)
	inSpaceWord := letter & (sum ^ letter)
	c.fill = carryOut
	f[fLower10Space] += bits.OnesCount64(l10 & inSpaceWord)
	f[fLower3] += bits.OnesCount64(l3 &^ inSpaceWord)
	f[fLower10] += bits.OnesCount64(l10 &^ inSpaceWord)
	f[fLower20] += bits.OnesCount64(l20 &^ inSpaceWord)

	// Punctuation runs.
	puStart := pu &^ pPU
	f[fPunct] += bits.OnesCount64(puStart) - bits.OnesCount64(start&onePunct)
	f[fPunctSpace] += bits.OnesCount64(puStart & pSpace)
	p1 := punct & pPU
	p2 := p1 & shl(p1, c.p1, 1)
	p4 := p2 & shl(p2, c.p2, 2)
	c.p1, c.p2 = p1, p2
	f[fPunct1] += bits.OnesCount64(p1)
	f[fPunct2] += bits.OnesCount64(p2)
	f[fPunct4] += bits.OnesCount64(p4)

	// Whitespace.
	nlStart := newline &^ shl(newline, c.newline, 1)
	c.newline = newline
	joins := nlStart & (pPU | pBlank)
	f[fNewline] += bits.OnesCount64(nlStart &^ joins)
	f[fNewlineAfter] += bits.OnesCount64(joins)
	// A single blank before a letter is the word's prefix; a single space before
	// punctuation belongs to the punctuation run.
	taken := letter&pBlank&^ppBlank | pu&pSpace&^ppBlank
	f[fBlank] += bits.OnesCount64(blank&^pBlank) - bits.OnesCount64(taken)
}

// multiByte counts the multi-byte characters that start in the block of s at i, whose
// bytes above ASCII are high, and returns the masks of the block's bytes that belong to
// letters and to symbols, including those of a character that started in the block before.
// A byte that does not start a valid sequence counts as an invalid symbol of its own.
func (p *heuristicParams) multiByte(s string, i int, high uint64, c *carry, f *[nFeatures]int) (letters, symbols uint64) {
	letters, symbols = c.mbLetter, c.mbSymbol
	c.mbLetter, c.mbSymbol = 0, 0
	m := high &^ (letters | symbols)
	// The CJK characters of the table, the common case, are counted here; every other
	// character by char.
	tokens, pairs := 0, 0
	prev, prevEnd := c.cjkPrev, c.cjkEnd
	for m != 0 {
		j := bits.TrailingZeros64(m)
		for {
			pos := i + j
			if idx := cjkAt(s, pos); idx >= 0 {
				// A run of CJK characters of the table, to the end of the block (the last
				// one may cross it).
				if prevEnd != pos {
					prev = -1
				}
				end := i + 64
				keys, shift := p.pairs.keys, p.pairs.shift
				for {
					tokens += int(p.cjk[idx>>2]>>((idx&3)*2)&3) + 1
					// pairs.has, inlined and without branches: prev is -1 at the start of a
					// run, which no key matches.
					key := uint32(prev)<<15 | uint32(idx) + 1
					pairs += b2i(keys[key*pairHash1>>shift] == key) | b2i(keys[key*pairHash2>>shift] == key)
					prev = idx
					pos += 3
					if pos >= end || pos+2 >= len(s) {
						break
					}
					w := s[pos : pos+3] // cjkAt, inlined
					b0, b1, b2 := w[0], w[1], w[2]
					e := &cjkLeads[b0&15]
					d := int(b0&0x0F)<<12 | int(b1&0x3F)<<6 | int(b2&0x3F) - e.lo
					if b0&0xF0 != 0xE0 || (b1^0x80)|(b2^0x80) >= 0x40 || uint(d) >= uint(e.n) {
						break
					}
					idx = e.off + d
				}
				prevEnd = pos
				k := pos - i // the run is bytes j..k-1 of the block
				if k > 64 {
					c.mbLetter = uint64(1)<<(k-64) - 1
					k = 64
				}
				letters |= ^uint64(0) << j & (^uint64(0) >> (64 - k))
				j = pos - i
			} else {
				size, letter := p.char(s, pos, f)
				here := (uint64(1)<<size - 1) << j
				var next uint64
				if j+size > 64 {
					next = uint64(1)<<(j+size-64) - 1
				}
				if letter {
					letters |= here
					c.mbLetter = next
				} else {
					symbols |= here
					c.mbSymbol = next
				}
				j += size
			}
			if j >= 64 {
				m = 0
				break
			}
			if high>>j&1 == 0 { // the next byte is ASCII: find the next character
				m &= ^uint64(0) << j
				break
			}
		}
	}
	f[fCJK] += tokens
	f[fCJKPair] += pairs
	c.cjkPrev, c.cjkEnd = prev, prevEnd
	return letters, symbols
}

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cjkAt returns the CJK table index of the three-byte character at s[i] when it is a kana,
// an ideograph or a Hangul syllable, else -1.
func cjkAt(s string, i int) int {
	if i+2 >= len(s) {
		return -1
	}
	w := s[i : i+3]
	b0, b1, b2 := w[0], w[1], w[2]
	e := &cjkLeads[b0&15]
	d := int(b0&0x0F)<<12 | int(b1&0x3F)<<6 | int(b2&0x3F) - e.lo
	if b0&0xF0 != 0xE0 || (b1^0x80)|(b2^0x80) >= 0x40 || uint(d) >= uint(e.n) {
		return -1
	}
	return e.off + d
}

// cjkLeads are, by the low half of a three-byte lead byte (E0..EF), the code points of the
// CJK table it leads to: from lo, n of them, at index off of the table.
var cjkLeads = [16]struct{ lo, n, off int }{
	0x3: {0x3040, 0xC0, 0},    // kana
	0x4: {0x4E00, 0x200, 192}, // ideographs
	0x5: {0x5000, 0x1000, 192 + 0x5000 - 0x4E00},
	0x6: {0x6000, 0x1000, 192 + 0x6000 - 0x4E00},
	0x7: {0x7000, 0x1000, 192 + 0x7000 - 0x4E00},
	0x8: {0x8000, 0x1000, 192 + 0x8000 - 0x4E00},
	0x9: {0x9000, 0x1000, 192 + 0x9000 - 0x4E00},
	0xA: {0xAC00, 0x400, 21184}, // Hangul syllables
	0xB: {0xB000, 0x1000, 21184 + 0xB000 - 0xAC00},
	0xC: {0xC000, 0x1000, 21184 + 0xC000 - 0xAC00},
	0xD: {0xD000, 0x7A4, 21184 + 0xD000 - 0xAC00},
}

// char counts the character at s[i], a byte above ASCII that does not start a character of
// the CJK table, and returns its length and whether it is a letter.
func (p *heuristicParams) char(s string, i int, f *[nFeatures]int) (size int, letter bool) {
	b := s[i]
	switch {
	case b >= 0xC2 && b <= 0xDF:
		size = 2
	case b >= 0xE0 && b <= 0xEF:
		size = 3
	case b >= 0xF0 && b <= 0xF4:
		size = 4
	default:
		f[fInvalid]++
		return 1, false
	}
	if i+size > len(s) {
		f[fInvalid]++
		return 1, false
	}
	r := rune(b) & (0x7F >> size)
	for k := 1; k < size; k++ {
		cb := s[i+k]
		if cb&0xC0 != 0x80 {
			f[fInvalid]++
			return 1, false
		}
		r = r<<6 | rune(cb&0x3F)
	}
	switch {
	case size == 2:
		if r < 0xC0 { // Latin-1 symbols and no-break space
			f[fSymbol]++
			return 2, false
		}
		f[fLatinExt]++
		return 2, true
	case size == 4:
		if r >= 0x20000 && r < 0x30000 { // CJK extension planes
			f[fCJK] += 2
			return 4, true
		}
		f[fEmoji]++
		return 4, false
	case r < 0x2000:
		f[fOther3]++
		return 3, true
	case r < 0x3000:
		f[fSymbol]++
		return 3, false
	case r < 0x3040:
		f[fCJKPunct]++
		return 3, false
	case r < 0x4E00: // Bopomofo, compatibility Jamo, extension A, ... (kana are in the table)
		f[fCJK] += 2
		return 3, true
	case r < 0xAC00: // Yi, Lisu, Vai, ... (ideographs are in the table)
		f[fOther3]++
		return 3, true
	case r < 0xE000: // Hangul Jamo extensions, surrogates (Hangul syllables are in the table)
		f[fOther3]++
		return 3, true
	case r >= 0xFF00 && r < 0xFF80: // full-width forms
		f[fCJKPunct]++
		return 3, false
	default: // private use, compatibility forms, specials
		f[fSymbol]++
		return 3, false
	}
}

// cjkIndex returns the index of r in the CJK table, or -1.
func cjkIndex(r rune) int {
	switch {
	case r >= 0x3040 && r <= 0x30FF:
		return int(r) - 0x3040
	case r >= 0x4E00 && r <= 0x9FFF:
		return 192 + int(r) - 0x4E00
	case r >= 0xAC00 && r <= 0xD7A3:
		return 21184 + int(r) - 0xAC00
	}
	return -1
}

// pairSet is a set of pairs of CJK table indexes, keyed a<<15 | b + 1 (0 is empty), in a
// cuckoo hash table: every key is in one of its two slots, so that a lookup is two loads
// and no branch, whether the pair is there (a third of the pairs of a text) or not.
type pairSet struct {
	keys  []uint32
	shift uint // 32 - log2(len(keys))
}

// The multipliers of the two hashes of a pairSet key.
const (
	pairHash1 = 0x9E3779B1
	pairHash2 = 0x85EBCA77
)

// newPairSet returns the set of the pairs of pairs, a string of concatenated pairs of
// characters of the CJK table. The table starts at twice the number of pairs and doubles
// until every pair finds a slot.
func newPairSet(pairs string) pairSet {
	var keys []uint32
	for len(pairs) > 0 {
		a, sa := utf8.DecodeRuneInString(pairs)
		b, sb := utf8.DecodeRuneInString(pairs[sa:])
		pairs = pairs[sa+sb:]
		keys = append(keys, uint32(cjkIndex(a))<<15|uint32(cjkIndex(b))+1)
	}
	size, shift := 1, uint(32)
	for size < 2*len(keys) {
		size, shift = size*2, shift-1
	}
	for ; ; size, shift = size*2, shift-1 {
		if set, ok := cuckoo(keys, size, shift); ok {
			return set
		}
	}
}

// cuckoo builds a pairSet of keys with size slots, or reports that a key found none.
func cuckoo(keys []uint32, size int, shift uint) (pairSet, bool) {
	set := pairSet{keys: make([]uint32, size), shift: shift}
	for _, key := range keys {
		h := key * pairHash1 >> shift
		for range 100 {
			key, set.keys[h] = set.keys[h], key
			if key == 0 {
				break
			}
			// The evicted key goes to its other slot.
			if h1 := key * pairHash1 >> shift; h1 != h {
				h = h1
			} else {
				h = key * pairHash2 >> shift
			}
		}
		if key != 0 {
			return pairSet{}, false
		}
	}
	return set, true
}

// has reports whether the pair of indexes a, b is in the set.
func (s *pairSet) has(a, b int) bool {
	key := uint32(a)<<15 | uint32(b) + 1
	return s.keys[key*pairHash1>>s.shift] == key || s.keys[key*pairHash2>>s.shift] == key
}
