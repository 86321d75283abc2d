package main

import (
	"fmt"
	"regexp"
	"strings"
)

// upstream is the mcp_server block's name.
const upstream = "everything"

// job is one execution: its tenant, the PII its program prints and the
// state it writes.
type job struct {
	i      int
	tenant string
	email  string
	phone  string
	key    string
}

func newJob(i, tenants int) job {
	t := i % tenants
	return job{
		i:      i,
		tenant: tenantID(t),
		email:  fmt.Sprintf("user.%d.t%d@example.com", i, t),
		phone:  fmt.Sprintf("+1 415-%03d-%04d", 200+i%700, i%10000),
		key:    fmt.Sprintf("soak-%07d.json", i),
	}
}

// program calls the upstream with the e-mail address, saves the state
// file and prints what the tool returned and the phone number. The PII is
// assembled in the sandbox, as data a program reads would be, so the code
// the model sends holds none.
func (j job) program() string {
	local, domain, _ := strings.Cut(j.email, "@")
	return fmt.Sprintf(`import cexec
from servers.everything import echo
email = %q + chr(64) + %q
phone = "+1 415-" + %q
reply = echo(message="contact " + email)
cexec.save_state(%q, {"i": %d, "tenant": %q})
print(reply)
print("phone", phone)
print("saved", %d)
`, local, domain, j.phone[len("+1 415-"):], j.key, j.i, j.tenant, j.i)
}

// rawPII returns the raw values of j found in a model-facing text,
// including the phone number's digits written without separators.
func (j job) rawPII(text string) []string {
	var found []string
	digits := strings.NewReplacer("+", "", " ", "", "-", "").Replace(j.phone)
	local, _, _ := strings.Cut(j.email, "@")
	for _, v := range []string{j.email, local + "@", j.phone, digits, digits[1:]} {
		if strings.Contains(text, v) {
			found = append(found, v)
		}
	}
	return found
}

// acked reports whether a model-facing reply acknowledges j's state write:
// the program ran to its last line, and the PII came back as tokens.
func (j job) acked(stdout string) (ok bool, tokenized bool) {
	ok = strings.Contains(stdout, fmt.Sprintf("saved %d\n", j.i))
	tokenized = strings.Contains(stdout, "[EMAIL_") && strings.Contains(stdout, "[PHONE_")
	return ok, tokenized
}

var (
	// The parts of an error that vary between occurrences, so that the
	// same failure counts once.
	reNumbers = regexp.MustCompile(`\d+(\.\d+)?`)
	reTokens  = regexp.MustCompile(`\[[A-Z_]+_\d+\]`)
	reHex     = regexp.MustCompile(`\b[0-9a-f]{8,}\b`)
	// A failure that names nothing: a bare transport word, or a gRPC
	// status passed through as it is.
	reGeneric = regexp.MustCompile(`(?i)^(?:[\w ]+: )*(eof|unexpected eof|connection reset by peer|broken pipe|transport is closing|context canceled|closed pipe|error reading from server: eof|internal error|unknown error)\.?$`)
)

// errorKind reduces an error message to the form it is counted under.
func errorKind(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = reTokens.ReplaceAllString(msg, "[TOKEN]")
	msg = reHex.ReplaceAllString(msg, "<id>")
	msg = reNumbers.ReplaceAllString(msg, "N")
	if len(msg) > 240 {
		msg = msg[:240] + "…"
	}
	return msg
}

// unclear reports why an error message does not explain the failure, or "".
func unclear(msg string) string {
	msg = strings.TrimSpace(msg)
	switch {
	case msg == "":
		return "empty"
	case strings.Contains(msg, "rpc error: code ="):
		return "a raw gRPC status"
	case reGeneric.MatchString(firstLine(msg)):
		return "a bare transport error"
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
