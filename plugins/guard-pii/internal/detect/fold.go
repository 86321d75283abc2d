package detect

import "strings"

// Obfuscations a value may carry past the detectors, which read ASCII
// punctuation and digits: fullwidth forms (ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ), the
// ideographic space, and zero-width characters inside a value
// (ja\u200bne@example.com). fold reads them as their plain forms; the spans
// found are mapped back to the original text's bytes.

// foldLeads are the first bytes of every character fold changes.
var foldLeads = [...]byte{0xE2, 0xE3, 0xEF}

// foldAt reports what the character at text[i] folds to: a byte to write
// (ok, with drop false) or nothing (drop), and its length in text. ok is
// false for a character fold leaves alone.
func foldAt(text string, i int) (repl byte, drop bool, size int, ok bool) {
	if i+2 >= len(text) {
		return 0, false, 0, false
	}
	b0, b1, b2 := text[i], text[i+1], text[i+2]
	switch {
	case b0 == 0xE2 && b1 == 0x80 && b2 >= 0x8B && b2 <= 0x8D: // U+200B..U+200D
		return 0, true, 3, true
	case b0 == 0xE2 && b1 == 0x81 && b2 == 0xA0: // U+2060 word joiner
		return 0, true, 3, true
	case b0 == 0xEF && b1 == 0xBB && b2 == 0xBF: // U+FEFF
		return 0, true, 3, true
	case b0 == 0xE3 && b1 == 0x80 && b2 == 0x80: // U+3000 ideographic space
		return ' ', false, 3, true
	case b0 == 0xEF && (b1 == 0xBC || b1 == 0xBD) && b2&0xC0 == 0x80:
		// U+FF01..U+FF5E are ASCII 0x21..0x7E.
		r := 0xF000 | rune(b1&0x3F)<<6 | rune(b2&0x3F)
		if r >= 0xFF01 && r <= 0xFF5E {
			return byte(r - 0xFF01 + 0x21), false, 3, true
		}
	}
	return 0, false, 0, false
}

// firstFold returns the offset of the first character fold changes, or
// -1. It looks only where a lead byte is, with the runtime's byte search,
// so text without such characters costs a few fast scans.
func firstFold(text string) int {
	first := -1
	for _, lead := range foldLeads {
		limit := len(text)
		if first >= 0 {
			limit = first
		}
		for off := 0; off < limit; {
			i := strings.IndexByte(text[off:limit], lead)
			if i < 0 {
				break
			}
			off += i
			if _, _, _, ok := foldAt(text, off); ok {
				first = off
				break
			}
			off++
		}
	}
	return first
}

// fold returns text with its obfuscations folded, and at, where at[i] is
// the offset in text of the character norm[i] comes from and
// at[len(norm)] is len(text). Text with nothing to fold comes back as it
// is, with a nil at, and nothing allocated.
func fold(text string) (norm string, at []int32) {
	first := firstFold(text)
	if first < 0 {
		return text, nil
	}
	b := make([]byte, first, len(text))
	copy(b, text[:first])
	at = make([]int32, first, len(text)+1)
	for i := range at {
		at[i] = int32(i)
	}
	for i := first; i < len(text); {
		if text[i] >= 0xE2 {
			if repl, drop, size, ok := foldAt(text, i); ok {
				if !drop {
					b = append(b, repl)
					at = append(at, int32(i))
				}
				i += size
				continue
			}
		}
		b = append(b, text[i])
		at = append(at, int32(i))
		i++
	}
	at = append(at, int32(len(text)))
	return string(b), at
}

// unfold maps spans found in a folded text back to the original's bytes
// (at from fold). A span's end takes in the characters dropped right
// after it, which never split a character.
func unfold(spans []Span, at []int32) {
	for i := range spans {
		spans[i].Start, spans[i].End = int(at[spans[i].Start]), int(at[spans[i].End])
	}
}
