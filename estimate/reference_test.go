package estimate

// The heuristic as it was before the fast paths of short texts and the cheaper block
// classification (commit 39350c3), kept verbatim under ref names: the oracle that the
// current heuristicParams.count must match on every input, count for count
// (reference_compare_test.go). Only the names differ; the tables (cjk, pairs, cjkLeads,
// weights) are shared, as they are data, not code.

import "math/bits"

// refCount returns the estimated number of tokens of s.
func (p *heuristicParams) refCount(s string) int {
	if s == "" {
		return 0
	}
	var f [nFeatures]int
	p.refFeatures(s, &f)
	var sum int64
	for i := 0; i+3 < nFeatures; i += 4 {
		sum += p.w[i]*int64(f[i]) + p.w[i+1]*int64(f[i+1]) + p.w[i+2]*int64(f[i+2]) + p.w[i+3]*int64(f[i+3])
	}
	for i := nFeatures &^ 3; i < nFeatures; i++ {
		sum += p.w[i] * int64(f[i])
	}
	// A 3% margin: undercounting admits more than the quota, overcounting only a little less.
	sum += sum * 3 / 100
	if sum < 64 { // any text is at least one token
		return 1
	}
	return int((sum + 32) / 64)
}

// refHi8 has the high bit of each of eight bytes, refLo8 the low bit.
const (
	refHi8 = 0x8080808080808080
	refLo8 = 0x0101010101010101
)

// refLoad8 returns s[i:i+8] as a little-endian word. Slicing first leaves one bounds check
// and lets the compiler merge the eight byte loads into one.
func refLoad8[T string | []byte](s T, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// refBytesIn marks, with its high bit, each byte of x from lo to hi; lo and hi are ASCII.
// Setting the high bit of every byte before subtracting keeps each byte's borrow inside it.
func refBytesIn(x uint64, lo, hi byte) uint64 {
	y := x | refHi8
	return (y - refLo8*uint64(lo)) &^ (y - refLo8*uint64(hi+1)) &^ x & refHi8
}

// refBlock holds one bit per byte of a block of up to 64 bytes, byte 0 in bit 0.
type refBlock struct {
	letter, upper, digit, space, blank, newline, high uint64
}

// refClassify returns the masks of the 64 bytes of s from i, which must all exist.
func refClassify[T string | []byte](s T, i int) refBlock {
	s = s[i : i+64]
	x0, x1, x2, x3 := refLoad8(s, 0), refLoad8(s, 8), refLoad8(s, 16), refLoad8(s, 24)
	x4, x5, x6, x7 := refLoad8(s, 32), refLoad8(s, 40), refLoad8(s, 48), refLoad8(s, 56)
	var b refBlock
	if x0&x1&x2&x3&x4&x5&x6&x7&refHi8 == refHi8 { // no ASCII at all, as in most of a CJK text
		b.high = ^uint64(0)
		return b
	}
	b.letter = refGather(refLetters(x0), refLetters(x1), refLetters(x2), refLetters(x3), refLetters(x4), refLetters(x5), refLetters(x6), refLetters(x7))
	b.upper = refGather(refLetters(x0)&^(x0<<2), refLetters(x1)&^(x1<<2), refLetters(x2)&^(x2<<2), refLetters(x3)&^(x3<<2),
		refLetters(x4)&^(x4<<2), refLetters(x5)&^(x5<<2), refLetters(x6)&^(x6<<2), refLetters(x7)&^(x7<<2))
	b.digit = refGather(refDigits(x0), refDigits(x1), refDigits(x2), refDigits(x3), refDigits(x4), refDigits(x5), refDigits(x6), refDigits(x7))
	b.space = refGather(refSpaces(x0), refSpaces(x1), refSpaces(x2), refSpaces(x3), refSpaces(x4), refSpaces(x5), refSpaces(x6), refSpaces(x7))
	b.blank = refGather(refBlanks(x0), refBlanks(x1), refBlanks(x2), refBlanks(x3), refBlanks(x4), refBlanks(x5), refBlanks(x6), refBlanks(x7))
	b.newline = refGather(refBlanks(x0)&refNewlineBits(x0), refBlanks(x1)&refNewlineBits(x1), refBlanks(x2)&refNewlineBits(x2), refBlanks(x3)&refNewlineBits(x3),
		refBlanks(x4)&refNewlineBits(x4), refBlanks(x5)&refNewlineBits(x5), refBlanks(x6)&refNewlineBits(x6), refBlanks(x7)&refNewlineBits(x7))
	b.high = refGather(x0&refHi8, x1&refHi8, x2&refHi8, x3&refHi8, x4&refHi8, x5&refHi8, x6&refHi8, x7&refHi8)
	return b
}

// refLetters, refDigits, refSpaces and refBlanks mark the bytes of x that are ASCII letters, digits,
// spaces, and from '\t' to '\r'.
func refLetters(x uint64) uint64 { return refBytesIn(x|0x2020202020202020, 'a', 'z') }
func refDigits(x uint64) uint64  { return refBytesIn(x, '0', '9') }
func refSpaces(x uint64) uint64  { return refBytesIn(x, ' ', ' ') }
func refBlanks(x uint64) uint64  { return refBytesIn(x, '\t', '\r') }

// refGather packs the high bits of the bytes of m0..m7, which have no other bits, into one
// mask: byte j of mk to bit 8k+j. Shifting puts byte j of every mk into byte j of one word,
// mk's bit in bit k, and transposing that 8×8 bit matrix gives the mask.
func refGather(m0, m1, m2, m3, m4, m5, m6, m7 uint64) uint64 {
	x := m0>>7 | m1>>6 | m2>>5 | m3>>4 | m4>>3 | m5>>2 | m6>>1 | m7
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}

// refNewlineBits marks, among the bytes of x from '\t' to '\r' (1001 to 1101 in their low
// bits), '\n' and '\r' (1010 and 1101): those whose bit 1 differs from both bit 0 and bit 2.
func refNewlineBits(x uint64) uint64 { return (x<<6 ^ x<<7) & (x<<5 ^ x<<6) & refHi8 }

// refClassifyTail returns the masks of s[i:], shorter than 64 bytes, as if the refBlock were
// padded with zero bytes. It classifies only the words the text has, which matters for
// short texts such as chat messages and names.
func refClassifyTail(s string, i int) (b refBlock) {
	var buf [64]byte
	n := copy(buf[:], s[i:])
	for k := 0; k < n; k += 8 {
		x := refLoad8(buf[:], k)
		l := refLetters(x)
		ws := refBlanks(x)
		sh := uint(k)
		b.letter |= refPack(l) << sh
		b.upper |= refPack(l&^(x<<2)) << sh
		b.digit |= refPack(refDigits(x)) << sh
		b.space |= refPack(refSpaces(x)) << sh
		b.blank |= refPack(ws) << sh
		b.newline |= refPack(ws&refNewlineBits(x)) << sh
		b.high |= refPack(x&refHi8) << sh
	}
	return b
}

// refPack gathers the high bits of the eight bytes of m, which has no other bit, into the
// eight low bits of the result, byte 0 to bit 0.
func refPack(m uint64) uint64 { return (m >> 7) * 0x0102040810204080 >> 56 }

// refCarry is what a refBlock passes on to the next: its masks, for shifts across the boundary,
// and the state of the multi-byte characters.
type refCarry struct {
	letter, lower, upper, pu, space, blank, newline uint64
	digit, digitStart, d1, d2, d4                   uint64
	l1, l2, l4, l10, u1, p1, p2                     uint64
	fill                                            uint64 // 1: the last byte is in a word after a space
	// Multi-byte characters.
	mbLetter, mbSymbol uint64 // bytes of the next refBlock that belong to a character of this one
	cjkPrev            int    // table index of the CJK character that ends where cjkEnd is, or -1
	cjkEnd             int
}

// refShl shifts x left by k (1..63) bits, filling in the top bits of prev.
func refShl(x, prev uint64, k uint) uint64 { return x<<k | prev>>(64-k) }

// refFeatures adds to f the features of s.
func (p *heuristicParams) refFeatures(s string, f *[nFeatures]int) {
	c := refCarry{cjkPrev: -1, cjkEnd: -1}
	for i := 0; i < len(s); i += 64 {
		var b refBlock
		valid := ^uint64(0)
		if len(s)-i >= 64 {
			b = refClassify(s, i)
		} else {
			b = refClassifyTail(s, i)
			valid = uint64(1)<<(len(s)-i) - 1
		}
		p.refAddBlock(s, i, b, valid, &c, f)
	}
}

// refAddBlock adds the features of the refBlock of s at i, whose bytes are those of valid.
func (p *heuristicParams) refAddBlock(s string, i int, b refBlock, valid uint64, c *refCarry, f *[nFeatures]int) {
	var mbLetter, mbSymbol uint64
	if b.high|c.mbLetter|c.mbSymbol != 0 {
		mbLetter, mbSymbol = p.refMultiByte(s, i, b.high, c, f)
	}
	letter := b.letter | mbLetter
	upper := b.upper
	lower := b.letter &^ upper
	newline := b.newline
	blank := (b.blank &^ newline) | b.space
	space := b.space
	digit := b.digit
	punct := valid &^ (b.letter | digit | b.blank | b.space | b.high) // ASCII punctuation and controls
	pu := punct | mbSymbol                                            // any punctuation or symbol

	// Words.
	pLetter := refShl(letter, c.letter, 1)
	pSpace := refShl(space, c.space, 1)
	pBlank := refShl(blank, c.blank, 1)
	pPU := refShl(pu, c.pu, 1)
	ppPU := refShl(pu, c.pu, 2)
	ppSpace := refShl(space, c.space, 2)
	ppBlank := refShl(blank, c.blank, 2)
	start := letter &^ pLetter
	f[fWord] += bits.OnesCount64(start)
	wordSpace := start & pSpace
	onePunct := pPU &^ ppPU &^ ppSpace // one punctuation character after neither punctuation nor a space
	prefixed := start & (pBlank | onePunct)
	f[fWordBare] += bits.OnesCount64(start &^ prefixed)
	f[fWordDigit] += bits.OnesCount64(start & refShl(digit, c.digit, 1))
	mbStart := start & mbLetter
	f[fWordMB] += bits.OnesCount64(mbStart)
	f[fWordMBSpace] += bits.OnesCount64(mbStart & pSpace)
	f[fCaseSplit] += bits.OnesCount64(upper & refShl(lower, c.lower, 1))
	u1 := upper & refShl(upper, c.upper, 1)
	u2 := u1 & refShl(u1, c.u1, 1)
	u3 := u2 & refShl(u1, c.u1, 2)
	f[fUpper3] += bits.OnesCount64(u3)

	// Letters of words after a space: the runs of letters that contain such a start. Adding
	// a run's lowest bit carries through the run; the refCarry out of bit 63 goes on in the
	// next refBlock.
	sum, carryOut := bits.Add64(letter, wordSpace, c.fill&letter)
	inSpaceWord := letter & (sum ^ letter)
	c.fill = carryOut

	l1 := lower & refShl(lower, c.lower, 1)
	l2 := l1 & refShl(l1, c.l1, 1)
	l3 := l2 & refShl(l1, c.l1, 2)
	l4 := l2 & refShl(l2, c.l2, 2)
	l8 := l4 & refShl(l4, c.l4, 4)
	l10 := l8 & refShl(l2, c.l2, 8)
	l20 := l10 & refShl(l10, c.l10, 10)
	f[fLower10Space] += bits.OnesCount64(l10 & inSpaceWord)
	f[fLower3] += bits.OnesCount64(l3 &^ inSpaceWord)
	f[fLower10] += bits.OnesCount64(l10 &^ inSpaceWord)
	f[fLower20] += bits.OnesCount64(l20 &^ inSpaceWord)

	// Digits: groups of three.
	dStart := digit &^ refShl(digit, c.digit, 1)
	d1 := digit & refShl(digit, c.digit, 1)
	d2 := d1 & refShl(d1, c.d1, 1)
	d3 := d2 & refShl(d1, c.d1, 2)
	d4 := d2 & refShl(d2, c.d2, 2)
	d6 := d4 & refShl(d2, c.d2, 4)
	d8 := d4 & refShl(d4, c.d4, 4)
	d9 := d8 & refShl(d1, c.d1, 8)
	f[fDigits] += bits.OnesCount64(dStart)
	f[fDigit3] += bits.OnesCount64(refShl(dStart, c.digitStart, 3)&d3 | refShl(dStart, c.digitStart, 6)&d6)
	f[fDigit9] += bits.OnesCount64(d9)

	// Punctuation runs.
	puStart := pu &^ pPU
	f[fPunct] += bits.OnesCount64(puStart) - bits.OnesCount64(start&onePunct)
	f[fPunctSpace] += bits.OnesCount64(puStart & pSpace)
	p1 := punct & pPU
	p2 := p1 & refShl(p1, c.p1, 1)
	p4 := p2 & refShl(p2, c.p2, 2)
	f[fPunct1] += bits.OnesCount64(p1)
	f[fPunct2] += bits.OnesCount64(p2)
	f[fPunct4] += bits.OnesCount64(p4)

	// Whitespace.
	nlStart := newline &^ refShl(newline, c.newline, 1)
	joins := nlStart & (pPU | pBlank)
	f[fNewline] += bits.OnesCount64(nlStart &^ joins)
	f[fNewlineAfter] += bits.OnesCount64(joins)
	// A single blank before a letter is the word's prefix; a single space before
	// punctuation belongs to the punctuation run.
	taken := letter&pBlank&^ppBlank | pu&pSpace&^ppBlank
	f[fBlank] += bits.OnesCount64(blank&^pBlank) - bits.OnesCount64(taken)

	c.letter, c.lower, c.upper, c.space, c.blank, c.newline = letter, lower, upper, space, blank, newline
	c.pu = pu
	c.digit, c.digitStart, c.d1, c.d2, c.d4 = digit, dStart, d1, d2, d4
	c.l1, c.l2, c.l4, c.l10, c.u1, c.p1, c.p2 = l1, l2, l4, l10, u1, p1, p2
}

// refMultiByte counts the multi-byte characters that start in the refBlock of s at i, whose
// bytes above ASCII are high, and returns the masks of the refBlock's bytes that belong to
// letters and to symbols, including those of a character that started in the refBlock before.
// A byte that does not start a valid sequence counts as an invalid symbol of its own.
func (p *heuristicParams) refMultiByte(s string, i int, high uint64, c *refCarry, f *[nFeatures]int) (letters, symbols uint64) {
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
			if idx := refCjkAt(s, pos); idx >= 0 {
				// A run of CJK characters of the table, to the end of the refBlock (the last
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
					pairs += refB2i(keys[key*pairHash1>>shift] == key) | refB2i(keys[key*pairHash2>>shift] == key)
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
				k := pos - i // the run is bytes j..k-1 of the refBlock
				if k > 64 {
					c.mbLetter = uint64(1)<<(k-64) - 1
					k = 64
				}
				letters |= ^uint64(0) << j & (^uint64(0) >> (64 - k))
				j = pos - i
			} else {
				size, letter := p.refChar(s, pos, f)
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

// refB2i is 1 for true and 0 for false, without a branch.
func refB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// refCjkAt returns the CJK table index of the three-byte character at s[i] when it is a kana,
// an ideograph or a Hangul syllable, else -1.
func refCjkAt(s string, i int) int {
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

// refChar counts the character at s[i], a byte above ASCII that does not start a character of
// the CJK table, and returns its length and whether it is a letter.
func (p *heuristicParams) refChar(s string, i int, f *[nFeatures]int) (size int, letter bool) {
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
