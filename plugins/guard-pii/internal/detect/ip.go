package detect

import (
	"net/netip"
	"strings"
)

// versionKeywords before a dotted quad mark it as a version ("version
// 1.2.3.4"), not an address.
var versionKeywords = newKeywordSet("version", "ver ", "ver.", "firmware")

// findIPv4 finds dotted-quad IPv4 addresses in a numeric run: exactly four
// groups joined by single dots, not part of a longer dotted sequence (an OID
// or a five-part version), valid per netip (no leading zeros, each part at
// most 255).
func findIPv4(text string, r *numRun, out []Span) []Span {
	g := r.groups
	for a := 0; a+3 < len(g); a++ {
		if a > 0 && strings.IndexByte(r.sep(text, a-1), '.') >= 0 {
			continue
		}
		b := a + 3
		if b < len(g)-1 && strings.IndexByte(r.sep(text, b), '.') >= 0 {
			continue
		}
		if b == len(g)-1 && r.glued {
			continue
		}
		ok := true
		for k := a; k < b; k++ {
			if r.sep(text, k) != "." {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		s := text[g[a].start:g[b].end]
		addr, err := netip.ParseAddr(s)
		if err != nil || !addr.Is4() || versionKeywords.before(text, g[a].start, 16) {
			continue
		}
		out = append(out, Span{Start: g[a].start, End: g[b].end, Type: IPAddress, Score: 0.9})
		a = b
	}
	return out
}

// findIPv6 finds IPv6 addresses: stretches of hex digits, colons and dots
// (for an embedded IPv4 tail) that stand alone as a word, have at least
// three non-empty groups (so "1::2" in a slice or "std::" in C++ is not one)
// and parse with netip. Zones ("%eth0") are not part of the span.
func findIPv6(text string, out []Span) []Span {
	for pos := 0; ; {
		c := strings.IndexByte(text[pos:], ':')
		if c < 0 {
			return out
		}
		c += pos
		start, end := c, c+1
		for start > 0 && (is(text[start-1], cHex) || text[start-1] == ':' || text[start-1] == '.') {
			start--
		}
		for end < len(text) && (is(text[end], cHex) || text[end] == ':' || text[end] == '.') {
			end++
		}
		pos = end
		for start < c && text[start] == '.' {
			start++
		}
		if wordAt(text, start-1) || wordAt(text, end) {
			continue
		}
		// A sentence may end right after the address, or a colon may
		// follow it ("addr fe80::1: unreachable"): retry without them.
		for tries := 0; tries < 3 && end > start; tries++ {
			s := text[start:end]
			if v6Groups(s) >= 3 {
				if addr, err := netip.ParseAddr(s); err == nil && addr.Is6() {
					out = append(out, Span{Start: start, End: end, Type: IPAddress, Score: 0.9})
					break
				}
			}
			if last := text[end-1]; last != '.' && last != ':' {
				break
			}
			end--
		}
	}
}

// v6Groups counts the non-empty colon-separated groups of s; an embedded
// IPv4 tail counts as the two groups it stands for.
func v6Groups(s string) int {
	n := 0
	for part := range strings.SplitSeq(s, ":") {
		switch {
		case strings.IndexByte(part, '.') >= 0:
			n += 2
		case part != "":
			n++
		}
	}
	return n
}
