package estimate

import "math/bits"

// asciiBlockSum returns the weighted sum of the features of a text of one block, whose
// bytes are those of valid and all ASCII: addBlock with the carry of no previous block
// (every shl a plain shift) and no multi-byte character, weighing each feature as it is
// counted instead of adding it to a vector, and skipping the groups of features whose
// masks are empty (most short messages have no digits, no newline, no run of capitals or
// of punctuation). It is what makes a short chat message cost a few hundred instructions
// rather than over a thousand; the tests check it against the reference implementation on
// every text of up to two bytes and many more.
func (p *heuristicParams) asciiBlockSum(b *block, valid uint64) int64 {
	w := &p.w
	letter, upper, digit, space, newline := b.letter, b.upper, b.digit, b.space, b.newline
	lower := letter &^ upper
	blank := (b.blank &^ newline) | space
	pu := valid &^ (letter | digit | b.blank | space) // ASCII punctuation and controls

	// Words.
	pSpace, pBlank, pPU := space<<1, blank<<1, pu<<1
	start := letter &^ (letter << 1)
	onePunct := pPU &^ (pu << 2) &^ (space << 2)
	sum := w[fWord]*int64(bits.OnesCount64(start)) +
		w[fWordBare]*int64(bits.OnesCount64(start&^(pBlank|onePunct)))
	if upper != 0 {
		sum += w[fCaseSplit] * int64(bits.OnesCount64(upper&(lower<<1)))
		if u1 := upper & (upper << 1); u1 != 0 {
			sum += w[fUpper3] * int64(bits.OnesCount64(u1&(u1<<1)&(u1<<2)))
		}
	}

	// Runs of lower-case letters, in words after a space or not.
	l1 := lower & (lower << 1)
	if l2 := l1 & (l1 << 1); l2 != 0 {
		inSpaceWord := letter & ((letter + start&pSpace) ^ letter)
		sum += w[fLower3] * int64(bits.OnesCount64(l2&(l1<<2)&^inSpaceWord))
		l4 := l2 & (l2 << 2)
		if l10 := l4 & (l4 << 4) & (l2 << 8); l10 != 0 {
			sum += w[fLower10Space]*int64(bits.OnesCount64(l10&inSpaceWord)) +
				w[fLower10]*int64(bits.OnesCount64(l10&^inSpaceWord)) +
				w[fLower20]*int64(bits.OnesCount64(l10&(l10<<10)&^inSpaceWord))
		}
	}

	// Digits: groups of three.
	if digit != 0 {
		dStart := digit &^ (digit << 1)
		d1 := digit & (digit << 1)
		d2 := d1 & (d1 << 1)
		d4 := d2 & (d2 << 2)
		sum += w[fWordDigit]*int64(bits.OnesCount64(start&(digit<<1))) +
			w[fDigits]*int64(bits.OnesCount64(dStart)) +
			w[fDigit3]*int64(bits.OnesCount64(dStart<<3&d2&(d1<<2)|dStart<<6&d4&(d2<<4))) +
			w[fDigit9]*int64(bits.OnesCount64(d4&(d4<<4)&(d1<<8)))
	}

	// Punctuation runs.
	if pu != 0 {
		puStart := pu &^ pPU
		sum += w[fPunct]*int64(bits.OnesCount64(puStart)-bits.OnesCount64(start&onePunct)) +
			w[fPunctSpace]*int64(bits.OnesCount64(puStart&pSpace))
		if p1 := pu & pPU; p1 != 0 {
			p2 := p1 & (p1 << 1)
			sum += w[fPunct1]*int64(bits.OnesCount64(p1)) +
				w[fPunct2]*int64(bits.OnesCount64(p2)) +
				w[fPunct4]*int64(bits.OnesCount64(p2&(p2<<2)))
		}
	}

	// Whitespace.
	if newline != 0 {
		nlStart := newline &^ (newline << 1)
		joins := nlStart & (pPU | pBlank)
		sum += w[fNewline]*int64(bits.OnesCount64(nlStart&^joins)) +
			w[fNewlineAfter]*int64(bits.OnesCount64(joins))
	}
	if blank != 0 {
		ppBlank := blank << 2
		taken := letter&pBlank&^ppBlank | pu&pSpace&^ppBlank
		sum += w[fBlank] * int64(bits.OnesCount64(blank&^pBlank)-bits.OnesCount64(taken))
	}
	return sum
}
