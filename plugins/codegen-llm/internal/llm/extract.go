package llm

import (
	"regexp"
	"strings"
	"unicode"
)

// thinkBlock matches the reasoning some models (DeepSeek-R1, QwQ, Qwen3)
// write before their answer; code inside it is a draft, not the answer.
var thinkBlock = regexp.MustCompile(`(?s)<(think|thinking|reasoning)>.*?</(think|thinking|reasoning)>`)

// pythonLangs are the info strings that mark a fenced block as Python.
var pythonLangs = map[string]bool{"python": true, "py": true, "python3": true, "py3": true}

// block is one fenced code block of a reply.
type block struct {
	lang string
	body string
}

// extractCode returns the program in a model's reply. Fenced blocks win:
// the longest block tagged Python (ties go to the last, the model's final
// word), else the longest untagged one; blocks tagged with another language
// (bash, json, text) are never code. A reply without fences is taken as
// code once leading and trailing prose lines are cut off. The result may
// still not compile; the caller checks.
func extractCode(reply string) string {
	reply = thinkBlock.ReplaceAllString(strings.ReplaceAll(reply, "\r\n", "\n"), "")
	// An unterminated <think> means the model ran out of tokens thinking.
	if i := strings.Index(reply, "<think>"); i >= 0 && !strings.Contains(reply[i:], "</think>") {
		reply = reply[:i]
	}
	blocks, fenced := fencedBlocks(reply)
	if fenced {
		var best, bestUntagged string
		for _, b := range blocks {
			body := strings.TrimSpace(b.body)
			switch {
			case pythonLangs[b.lang]:
				if len(body) >= len(best) && body != "" {
					best = body
				}
			case b.lang == "":
				if len(body) >= len(bestUntagged) && body != "" {
					bestUntagged = body
				}
			}
		}
		if best == "" {
			best = bestUntagged
		}
		if best == "" {
			return ""
		}
		return best + "\n"
	}
	return unfenced(reply)
}

// fencedBlocks splits a Markdown reply into its fenced code blocks
// (``` or ~~~, indented at most three spaces, closed by a fence of the same
// character at least as long). A block left open at the end of the reply
// (the model hit its token limit) runs to the end. fenced is false when the
// reply has no fence at all.
func fencedBlocks(reply string) (blocks []block, fenced bool) {
	lines := strings.Split(reply, "\n")
	for i := 0; i < len(lines); i++ {
		ch, n, info, ok := fenceLine(lines[i])
		if !ok {
			continue
		}
		fenced = true
		lang := strings.ToLower(strings.Fields(info + " x")[0])
		if info == "" {
			lang = ""
		}
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if c2, n2, info2, ok := fenceLine(lines[j]); ok && c2 == ch && n2 >= n && strings.TrimSpace(info2) == "" {
				break
			}
			body = append(body, lines[j])
		}
		blocks = append(blocks, block{lang: lang, body: strings.Join(body, "\n")})
		i = j
	}
	return blocks, fenced
}

// fenceLine parses a fence: up to three spaces, three or more backticks or
// tildes, then an info string (a backtick fence's info has no backtick).
func fenceLine(l string) (ch byte, n int, info string, ok bool) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return 0, 0, "", false
	}
	ch = t[0]
	for n < len(t) && t[n] == ch {
		n++
	}
	if n < 3 {
		return 0, 0, "", false
	}
	info = strings.TrimSpace(t[n:])
	if ch == '`' && strings.Contains(info, "`") {
		return 0, 0, "", false
	}
	return ch, n, info, true
}

// codeStart matches lines that begin Python code rather than prose.
var codeStart = regexp.MustCompile(`^(import |from \S+ import |def |async def |class |@|#|if |for |while |with |try:|print\(|[A-Za-z_][A-Za-z0-9_.]*\s*(=|\(|\[|\+=|-=)|[A-Za-z_][A-Za-z0-9_.]*(\s*,\s*[A-Za-z_][A-Za-z0-9_.]*)+\s*=|"""|''')`)

// unfenced cuts prose lines off the start and end of a reply that has no
// fences ("Here is the program:", "This prints ..."), keeping the middle.
func unfenced(reply string) string {
	lines := strings.Split(strings.TrimSpace(reply), "\n")
	start := 0
	for start < len(lines) && !codeStart.MatchString(lines[start]) {
		start++
	}
	end := len(lines)
	for end > start && isProse(lines[end-1]) {
		end--
	}
	code := strings.TrimSpace(strings.Join(lines[start:end], "\n"))
	if code == "" {
		return ""
	}
	return code + "\n"
}

// isProse reports whether a trailing line reads as prose or is blank: not
// indented, not code-looking, and a sentence (ends with . ! ? or :, or has
// no operators) or a Markdown list item.
func isProse(l string) bool {
	t := strings.TrimSpace(l)
	if t == "" {
		return true
	}
	if l[0] == ' ' || l[0] == '\t' || codeStart.MatchString(l) {
		return false
	}
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") {
		return true
	}
	if len(strings.Fields(t)) < 2 || !unicode.IsLetter([]rune(t)[0]) {
		return false
	}
	return strings.ContainsRune(".!?:", rune(t[len(t)-1])) || !strings.ContainsAny(t, "=()[]{}")
}
