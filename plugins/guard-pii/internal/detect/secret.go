package detect

import (
	"math"
	"strings"
)

// prefixRule is a token format announced by a fixed prefix.
type prefixRule struct {
	prefix string
	// body is the class of the characters after the prefix.
	body uint8
	// min and max bound the body length; max 0 means unbounded.
	min, max int
	// mixed requires the body to contain a digit and a letter, which keeps
	// words such as "sk-learn-compatible" out.
	mixed bool
}

// Body classes of the prefix rules.
const (
	bAlnum      = cDigit | cUpper | cLower
	bUpperDigit = cDigit | cUpper
	bLetter     = cUpper | cLower
)

// bodyOK reports whether c may appear in a body of class body. Classes
// beyond alphanumerics: cToken here means [A-Za-z0-9_-] (URL-safe base64),
// cWord means [A-Za-z0-9_].
func bodyOK(c byte, body uint8) bool {
	switch body {
	case cToken:
		return is(c, cWord) || c == '-'
	case cWord:
		return is(c, cWord)
	case cDomain: // [A-Za-z0-9-], Slack's token alphabet
		return is(c, bAlnum) || c == '-'
	}
	return is(c, body)
}

// prefixRules are the known token formats, from the issuers' documentation:
// OpenAI and Anthropic API keys, GitHub tokens, Slack tokens, AWS access key
// ids, Google API keys, GitLab personal access tokens, Stripe secret and
// restricted keys, npm and Hugging Face tokens, PyPI upload tokens.
var prefixRules = []prefixRule{
	{prefix: "sk-ant-", body: cToken, min: 32},
	{prefix: "sk-", body: cToken, min: 20, mixed: true},
	{prefix: "ghp_", body: bAlnum, min: 36, max: 255},
	{prefix: "gho_", body: bAlnum, min: 36, max: 255},
	{prefix: "ghu_", body: bAlnum, min: 36, max: 255},
	{prefix: "ghs_", body: bAlnum, min: 36, max: 255},
	{prefix: "ghr_", body: bAlnum, min: 36, max: 255},
	{prefix: "github_pat_", body: cWord, min: 22},
	{prefix: "xoxb-", body: cDomain, min: 10},
	{prefix: "xoxp-", body: cDomain, min: 10},
	{prefix: "xoxa-", body: cDomain, min: 10},
	{prefix: "xoxs-", body: cDomain, min: 10},
	{prefix: "xoxr-", body: cDomain, min: 10},
	{prefix: "xoxe-", body: cDomain, min: 10},
	{prefix: "xapp-", body: cDomain, min: 20},
	{prefix: "AKIA", body: bUpperDigit, min: 16, max: 16},
	{prefix: "ASIA", body: bUpperDigit, min: 16, max: 16},
	{prefix: "AIza", body: cToken, min: 35, max: 35},
	{prefix: "glpat-", body: cToken, min: 20},
	{prefix: "sk_live_", body: bAlnum, min: 16},
	{prefix: "rk_live_", body: bAlnum, min: 16},
	{prefix: "sk_test_", body: bAlnum, min: 16},
	{prefix: "rk_test_", body: bAlnum, min: 16},
	{prefix: "npm_", body: bAlnum, min: 36, max: 36},
	{prefix: "hf_", body: bLetter, min: 30, max: 40},
	{prefix: "pypi-AgEIcHlwaS5vcmc", body: cToken, min: 50},
}

// rulesByFirstByte indexes prefixRules by their first byte, so the walk
// over token runs checks only the rules that can match.
var rulesByFirstByte = func() (t [256][]*prefixRule) {
	for i := range prefixRules {
		r := &prefixRules[i]
		t[r.prefix[0]] = append(t[r.prefix[0]], r)
	}
	return t
}()

// knownPair marks the two-byte beginnings of every known format (the
// prefix rules, "eyJ" of a JWT, "hooks.slack.com"): most token runs are
// words, and one table load rejects them.
var knownPair = func() *[1 << 16]bool {
	var t [1 << 16]bool
	for _, r := range prefixRules {
		t[uint16(r.prefix[0])<<8|uint16(r.prefix[1])] = true
	}
	t[uint16('e')<<8|'y'] = true
	t[uint16('h')<<8|'o'] = true
	return &t
}()

// tokenOptions say what the walk over token runs looks for.
type tokenOptions struct {
	secrets   bool // known formats and PEM blocks
	entropy   bool // the high-entropy rule (with secrets)
	threshold float64
	minLen    int
	iban      bool
}

// findTokens walks the text's token runs once. At the start of each run it
// looks for an IBAN; there, and after each "/" or "+" inside the run, for a
// known secret format, a JSON Web Token, a Slack webhook or a PEM block;
// then it applies the high-entropy rule to the run.
func findTokens(text string, opt tokenOptions, out []Span) []Span {
	n := len(text)
	for i := 0; i < n; {
		for i < n && runByte[text[i]] == 0 {
			i++
		}
		if i == n {
			break
		}
		if opt.iban && text[i] >= 'A' && text[i] <= 'Z' {
			if end, ok := matchIBAN(text, i); ok {
				out = append(out, Span{Start: i, End: end, Type: IBAN, Score: 0.99})
			}
		}
		if !opt.secrets {
			for i < n && runByte[text[i]] != 0 {
				i++
			}
			continue
		}
		if text[i] == '-' {
			if end, private, complete, ok := matchPEM(text, i); ok {
				// A private key is a secret; a certificate or public key
				// is not, and its base64 body must not trip the entropy
				// rule either.
				if private {
					score := 0.99
					if !complete {
						score = 0.95
					}
					out = append(out, Span{Start: i, End: end, Type: Secret, Score: score})
				}
				i = max(end, i+1)
				continue
			}
		}
		start := i
		var seen uint8 // the runByte classes in this run
		for i < n {
			v := runByte[text[i]]
			if v == 0 {
				break
			}
			seen |= v
			i++
		}
		if i < n && text[i] == '=' && paddingFrom(text, i) {
			for i < n && text[i] == '=' {
				i++
			}
		}
		out = knownAt(text, start, out)
		if seen&2 != 0 {
			for k := start + 1; k < i; k++ {
				if runByte[text[k-1]]&2 != 0 {
					out = knownAt(text, k, out)
				}
			}
		}
		if opt.entropy && i-start >= opt.minLen {
			out = entropyRun(text, start, i, opt.threshold, opt.minLen, out)
		}
	}
	return out
}

// runByte classifies bytes for the walk: 0 ends a token run, 1 continues
// it, 3 continues it and may be followed by a known prefix ("/" and "+");
// bit 2 marks the latter. "=" is 0: it only continues a run as trailing
// padding.
var runByte = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		if is(byte(c), cToken) && c != '=' {
			t[c] = 1
		}
	}
	t['/'], t['+'] = 3, 3
	return t
}()

// knownAt appends the known-format secret starting at i, if any.
func knownAt(text string, i int, out []Span) []Span {
	if i+1 >= len(text) || !knownPair[uint16(text[i])<<8|uint16(text[i+1])] {
		return out
	}
	c := text[i]
	for _, r := range rulesByFirstByte[c] {
		if end, ok := matchPrefix(text, i, r); ok {
			return append(out, Span{Start: i, End: end, Type: Secret, Score: 0.99})
		}
	}
	switch c {
	case 'e':
		if end, ok := matchJWT(text, i); ok {
			return append(out, Span{Start: i, End: end, Type: Secret, Score: 0.97})
		}
	case 'h':
		if start, end, ok := matchSlackWebhook(text, i); ok {
			return append(out, Span{Start: start, End: end, Type: Secret, Score: 0.99})
		}
	}
	return out
}

// matchPrefix reports whether rule r matches at i and where its body ends.
func matchPrefix(text string, i int, r *prefixRule) (int, bool) {
	if !strings.HasPrefix(text[i:], r.prefix) || wordAt(text, i-1) || (i > 0 && text[i-1] == '-') {
		return 0, false
	}
	body := i + len(r.prefix)
	end := body
	for end < len(text) && bodyOK(text[end], r.body) {
		end++
	}
	n := end - body
	if n < r.min || (r.max > 0 && n > r.max) || (r.max > 0 && wordAt(text, end)) {
		return 0, false
	}
	if r.mixed && !hasDigitAndLetter(text[body:end]) {
		return 0, false
	}
	return end, true
}

// matchPEM matches a PEM block at i ("-----BEGIN <label>-----"), from the
// BEGIN line through the END line with the same label, or, when the END
// line is missing (a truncated paste), through the last line of the body:
// base64 lines, plus the "Name: value" headers of encrypted keys and the
// blank line after them. private reports whether the label ends in
// "PRIVATE KEY" (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8).
func matchPEM(text string, i int) (end int, private, complete, ok bool) {
	const begin = "-----BEGIN "
	if !strings.HasPrefix(text[i:], begin) {
		return 0, false, false, false
	}
	rest := text[i+len(begin):]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		nl = len(rest)
	}
	label, found := strings.CutSuffix(strings.TrimRight(rest[:nl], "\r "), "-----")
	if !found || label == "" || strings.Contains(label, "-----") {
		return 0, false, false, false
	}
	private = strings.HasSuffix(label, "PRIVATE KEY")
	pos := i + len(begin) + nl
	endLine := "-----END " + label + "-----"
	if e := strings.Index(text[pos:], endLine); e >= 0 {
		return pos + e + len(endLine), private, true, true
	}
	stop := pos
	headers, body := false, false
	for pos < len(text) {
		pos++ // the newline
		lineEnd := strings.IndexByte(text[pos:], '\n')
		if lineEnd < 0 {
			lineEnd = len(text) - pos
		}
		line := strings.TrimRight(text[pos:pos+lineEnd], "\r ")
		switch {
		case line == "" && headers && !body:
		case line == "":
			return stop, private, false, true
		case !body && strings.IndexByte(line, ':') > 0:
			headers = true
		case base64Line(line):
			body = true
			stop = pos + len(line)
		default:
			return stop, private, false, true
		}
		pos += lineEnd
	}
	return stop, private, false, true
}

func base64Line(s string) bool {
	for i := 0; i < len(s); i++ {
		if !is(s[i], cToken) {
			return false
		}
	}
	return true
}

// matchJWT matches a JSON Web Token at i: a header and a payload that are
// base64url JSON objects ("eyJ" is the encoding of `{"`) and an optional
// signature, separated by dots.
func matchJWT(text string, i int) (int, bool) {
	b64 := func(k int) int {
		for k < len(text) && (is(text[k], cWord) || text[k] == '-') {
			k++
		}
		return k
	}
	if !strings.HasPrefix(text[i:], "eyJ") || wordAt(text, i-1) {
		return 0, false
	}
	h := b64(i)
	if h-i < 10 || !strings.HasPrefix(text[h:], ".eyJ") {
		return 0, false
	}
	p := b64(h + 1)
	if p-h-1 < 10 || p >= len(text) || text[p] != '.' {
		return 0, false
	}
	return b64(p + 1), true
}

// matchSlackWebhook matches hooks.slack.com/services/T…/B…/… at i, taking
// in the https:// or http:// written before it.
func matchSlackWebhook(text string, i int) (int, int, bool) {
	const host = "hooks.slack.com/services/"
	if !strings.HasPrefix(text[i:], host) {
		return 0, 0, false
	}
	start := i
	for _, scheme := range []string{"https://", "http://"} {
		if strings.HasSuffix(text[:i], scheme) {
			start = i - len(scheme)
		}
	}
	path := i + len(host)
	end := path
	for end < len(text) && (is(text[end], bAlnum) || text[end] == '/' || text[end] == '_') {
		end++
	}
	if end-path < 20 || strings.Count(text[path:end], "/") < 2 {
		return 0, 0, false
	}
	return start, end, true
}

// entropyRun applies the high-entropy rule to the token run
// text[start:end]: at least minLen characters that look random (a letter
// and a digit, upper and lower case, not only hex digits since hashes, UUIDs
// and git object ids are not secrets, not a name made of words) with
// Shannon entropy of at least threshold bits per character. "=" counts only
// as trailing base64 padding, so "password=…" is read as its value. A run
// that looks like a file path is judged segment by segment.
func entropyRun(text string, start, end int, threshold float64, minLen int, out []Span) []Span {
	run := text[start:end]
	if !pathLike(run) {
		if randomToken(run, threshold) {
			out = append(out, Span{Start: start, End: end, Type: Secret, Score: 0.7})
		}
		return out
	}
	off := start
	for seg := range strings.SplitSeq(run, "/") {
		if len(seg) >= minLen && randomToken(seg, threshold) {
			out = append(out, Span{Start: off, End: off + len(seg), Type: Secret, Score: 0.6})
		}
		off += len(seg) + 1
	}
	return out
}

// paddingFrom reports whether text[i:] starts with base64 padding: one to
// three "=" not followed by another token character.
func paddingFrom(text string, i int) bool {
	j := i
	for j < len(text) && text[j] == '=' && j-i < 3 {
		j++
	}
	return j == len(text) || !is(text[j], cToken)
}

// pathLike reports whether a run containing "/" reads as a file path or
// URL path: two or more "/"-separated segments that are lower-case words of
// three or more letters ("/usr/local/lib/…", "api/v1/users/…"), or one
// after a leading "/". Random base64 has "/" too, but rarely such
// segments.
func pathLike(run string) bool {
	if strings.IndexByte(run, '/') < 0 {
		return false
	}
	words := 0
	for seg := range strings.SplitSeq(run, "/") {
		if len(seg) < 3 {
			continue
		}
		word := true
		for i := 0; i < len(seg); i++ {
			if !is(seg[i], cLower) && seg[i] != '-' && seg[i] != '_' {
				word = false
				break
			}
		}
		if word {
			words++
		}
	}
	return words >= 2 || (words == 1 && run[0] == '/')
}

// randomToken applies the character-class, word-likeness and entropy
// tests.
func randomToken(s string, threshold float64) bool {
	var k uint8
	hex := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		k |= classes[c]
		if !is(c, cHex) && c != '-' {
			hex = false
		}
	}
	if hex || k&cDigit == 0 || k&cUpper == 0 || k&cLower == 0 {
		return false
	}
	return !wordLike(s) && shannon(s) >= threshold
}

// wordLike reports whether s reads as an identifier made of words
// ("MyVeryLongClassName2024Handler", "AES256GCMEncryptionKey") rather than
// random characters. Entropy alone cannot tell them apart at 20-30
// characters: both score about 4 bits. Two measures can. w is the share of
// characters in words of three or more lower-case letters, optionally
// capitalised; in random base62/base64 strings of 20 to 64 characters it is
// above 0.6 for fewer than 1 in 100 (measured on 4,000 samples per length),
// in camelCase and snake_case names it is mostly above 0.6. t is the share
// of adjacent characters of different classes (upper, lower, digit, other);
// random strings stay above 0.35 in 99% of samples, names with acronyms and
// long words fall below.
func wordLike(s string) bool {
	covered, changes := 0, 0
	for i := 0; i < len(s); {
		j := i
		if is(s[j], cUpper) {
			j++
		}
		k := j
		for k < len(s) && is(s[k], cLower) {
			k++
		}
		if k-j >= 3 {
			covered += k - i
			i = k
			continue
		}
		i++
	}
	for i := 1; i < len(s); i++ {
		if charClass(s[i]) != charClass(s[i-1]) {
			changes++
		}
	}
	w := float64(covered) / float64(len(s))
	t := float64(changes) / float64(len(s)-1)
	return w >= 0.6 || (w >= 0.4 && t < 0.35)
}

func charClass(c byte) uint8 {
	return classes[c] & (cUpper | cLower | cDigit)
}

// shannon returns the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

func hasDigitAndLetter(s string) bool {
	var k uint8
	for i := 0; i < len(s); i++ {
		k |= classes[s[i]]
	}
	return k&cDigit != 0 && k&(cUpper|cLower) != 0
}
