package estimate

// The classification of a block: each byte of up to 64 bytes of text becomes one bit in
// each of a few 64-bit masks.

// hi8 has the high bit of each of eight bytes.
const hi8 = 0x8080808080808080

// load8 returns s[i:i+8] as a little-endian word. Slicing first leaves one bounds check
// and lets the compiler merge the eight byte loads into one.
func load8(s string, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// loadTail returns the last n bytes of s (1 to 7), which has at least n, as a word padded
// with zero bytes. From eight bytes on it loads the word that ends where s ends and
// shifts the bytes before the n out, so that no byte is copied.
func loadTail(s string, n int) uint64 {
	if len(s) >= 8 {
		return load8(s, len(s)-8) >> (64 - 8*uint(n))
	}
	var x uint64
	for k := n - 1; k >= 0; k-- {
		x = x<<8 | uint64(s[len(s)-n+k])
	}
	return x
}

// block holds one bit per byte of a block of up to 64 bytes, byte 0 in bit 0: the ASCII
// letters, their capitals, digits, spaces, the blanks '\t' to '\r', among those '\n' and
// '\r', and the bytes above ASCII.
type block struct {
	letter, upper, digit, space, blank, newline, high uint64
}

// The classification transposes the block: the 64×8 bit matrix of its bytes becomes eight
// bit planes, plane b holding bit b of every byte, and each class is then a formula of the
// planes, for all 64 bytes at once. The transposition is an 8×8 bit transposition of each
// word (transpose8), after which byte b of word k holds bit b of the word's bytes, and an
// 8×8 byte transposition of the eight words (transposeBytes).

// transpose8 transposes the 8×8 bit matrix of x: bit k of byte j goes to bit j of byte k.
func transpose8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}

// swapBytes exchanges the groups of bytes that mask selects in b with those of a above
// them by shift: one step of transposeBytes.
func swapBytes(a, b, mask uint64, shift uint) (uint64, uint64) {
	x := (a>>shift ^ b) & mask
	return a ^ x<<shift, b ^ x
}

// transposeBytes transposes the 8×8 byte matrix of w0..w7, byte j of word k to byte k of
// word j, by exchanging blocks of 4×4, 2×2 and 1×1 bytes.
func transposeBytes(w0, w1, w2, w3, w4, w5, w6, w7 uint64) (p0, p1, p2, p3, p4, p5, p6, p7 uint64) {
	const m32, m16, m8 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	w0, w4 = swapBytes(w0, w4, m32, 32)
	w1, w5 = swapBytes(w1, w5, m32, 32)
	w2, w6 = swapBytes(w2, w6, m32, 32)
	w3, w7 = swapBytes(w3, w7, m32, 32)
	w0, w2 = swapBytes(w0, w2, m16, 16)
	w1, w3 = swapBytes(w1, w3, m16, 16)
	w4, w6 = swapBytes(w4, w6, m16, 16)
	w5, w7 = swapBytes(w5, w7, m16, 16)
	w0, w1 = swapBytes(w0, w1, m8, 8)
	w2, w3 = swapBytes(w2, w3, m8, 8)
	w4, w5 = swapBytes(w4, w5, m8, 8)
	w6, w7 = swapBytes(w6, w7, m8, 8)
	return w0, w1, w2, w3, w4, w5, w6, w7
}

// classifyWords sets b to the masks of the 64 bytes of the words w0..w7, byte j of wk being
// byte 8k+j of the block.
func classifyWords(b *block, w0, w1, w2, w3, w4, w5, w6, w7 uint64) {
	b0, b1, b2, b3, b4, b5, b6, b7 := transposeBytes(transpose8(w0), transpose8(w1), transpose8(w2), transpose8(w3),
		transpose8(w4), transpose8(w5), transpose8(w6), transpose8(w7))
	classifyPlanes(b, b0, b1, b2, b3, b4, b5, b6, b7)
}

// classifyPlanes sets b to the masks of the bytes whose bit planes are b0..b7 (bit i of bk
// is bit k of byte i):
//   - letters are 0x41..0x5A and 0x61..0x7A: bit 7 clear, bit 6 set, the low five bits
//     from 1 to 26 (11010: not 11011 or above); capitals have bit 5 clear;
//   - digits are 0x30..0x39: 0011 above, the low four bits at most 9 (1001);
//   - the space is 0x20: bit 5 alone;
//   - blanks are 0x09..0x0D: 00001 above, the low three bits from 1 to 5, and among them
//     '\n' (1010) and '\r' (1101) are those whose bit 1 differs from bits 0 and 2.
func classifyPlanes(b *block, b0, b1, b2, b3, b4, b5, b6, b7 uint64) {
	low5 := b4 | b3 | b2 | b1 | b0 // the low five bits are not all zero
	letter := b6 &^ b7 & low5 &^ (b4 & b3 & (b2 | b1&b0))
	blank := b3 &^ (b7 | b6 | b5 | b4) & (b2 | b1 | b0) &^ (b2 & b1)
	*b = block{
		letter:  letter,
		upper:   letter &^ b5,
		digit:   b5 & b4 &^ (b7 | b6) &^ (b3 & (b2 | b1)),
		space:   b5 &^ (b7 | b6 | low5),
		blank:   blank,
		newline: blank & (b1 ^ b0) & (b1 ^ b2),
		high:    b7,
	}
}

// classify sets b to the masks of the 64 bytes of s from i, which must all exist.
func classify(b *block, s string, i int) {
	s = s[i : i+64]
	w0, w1, w2, w3 := load8(s, 0), load8(s, 8), load8(s, 16), load8(s, 24)
	w4, w5, w6, w7 := load8(s, 32), load8(s, 40), load8(s, 48), load8(s, 56)
	if w0&w1&w2&w3&w4&w5&w6&w7&hi8 == hi8 {
		*b = block{high: ^uint64(0)} // no ASCII at all, as in most of a CJK text
		return
	}
	classifyWords(b, w0, w1, w2, w3, w4, w5, w6, w7)
}

// classifyTail sets b to the masks of s[i:], 1 to 63 bytes, as if the block were padded
// with zero bytes. It reads only the words the text has, the last one by loadTail, so
// that nothing is copied, and transposes only those words' bits (a missing word's planes
// are zero): for the few words of a short text (a chat message, a name) that is cheaper
// than classify's eight.
func classifyTail(b *block, s string, i int) {
	if len(s)-i <= 16 {
		classify16(b, s[i:])
	} else {
		classifyWords1(b, s[i:])
	}
}

// classifyWords1 is classifyTail for a text of 17 to 63 bytes: the bit transposition of
// each word it has, then the byte transposition of all eight (cheaper, from three words
// on, than putting each word's planes in place on its own).
func classifyWords1(b *block, s string) {
	var t [8]uint64
	k := 0
	for ; k+8 <= len(s); k += 8 {
		t[k/8] = transpose8(load8(s, k))
	}
	if k < len(s) {
		t[k/8&7] = transpose8(loadTail(s, len(s)-k))
	}
	p0, p1, p2, p3, p4, p5, p6, p7 := transposeBytes(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7])
	classifyPlanes(b, p0, p1, p2, p3, p4, p5, p6, p7)
}

// classify16 is classifyTail for a text of 1 to 16 bytes, in two words and without a loop.
func classify16(b *block, s string) {
	var x0, x1 uint64
	if len(s) > 8 {
		x0, x1 = load8(s, 0), loadTail(s, len(s)-8)
	} else {
		x0 = loadTail(s, len(s))
	}
	t0, t1 := transpose8(x0), transpose8(x1)
	classifyPlanes(b, t0&0xFF|t1&0xFF<<8, t0>>8&0xFF|t1>>8&0xFF<<8, t0>>16&0xFF|t1>>16&0xFF<<8,
		t0>>24&0xFF|t1>>24&0xFF<<8, t0>>32&0xFF|t1>>32&0xFF<<8, t0>>40&0xFF|t1>>40&0xFF<<8,
		t0>>48&0xFF|t1>>48&0xFF<<8, t0>>56|t1>>56<<8)
}
