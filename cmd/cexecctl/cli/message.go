package cli

import (
	"errors"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Message is err as cexecctl prints it. A daemon's answer shows as its
// description alone: "rpc error: code = NotFound desc =" is transport
// detail an operator cannot act on. ExitCode still reads the code from err.
func Message(err error) string {
	msg := err.Error()
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if !errors.As(err, &se) {
		return msg
	}
	return strings.Replace(msg, se.Error(), describe(se.GRPCStatus()), 1)
}

// sentinel is the suffix the daemon's sentinel error of a code leaves on a
// description (core wraps pluginapi.ErrNotFound and the like), and the
// words with which a description already says the same.
type sentinel struct {
	suffix string
	said   *regexp.Regexp
}

var sentinels = map[codes.Code]sentinel{
	codes.NotFound:           {": not found", words("not", "no", "never", "unknown", "removed", "missing")},
	codes.InvalidArgument:    {": invalid argument", words("invalid", "not valid", "must", "bad", "too large", "too long", "empty", "not supported", "already", "use", "only")},
	codes.ResourceExhausted:  {": resource exhausted", words("quota", "exceeded", "full", "too many", "limit", "no room")},
	codes.PermissionDenied:   {": denied", words("denied", "refused", "not allowed", "forbidden")},
	codes.FailedPrecondition: {": unavailable", words("not running", "unavailable", "try again", "retry")},
}

// words matches any of ws as words of prose: "no" in "no tenant x" but not
// in a name such as "no-such-session", where \b would find it.
func words(ws ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[\s(])(` + strings.Join(ws, "|") + `)([\s).,;:]|$)`)
}

// describe is a status in words: its description without a sentinel
// suffix the rest already says, or the code's name when it has none.
func describe(s *status.Status) string {
	desc := s.Message()
	if desc == "" {
		return codeWords(s.Code())
	}
	if sn, ok := sentinels[s.Code()]; ok {
		if rest, cut := strings.CutSuffix(desc, sn.suffix); cut && sn.said.MatchString(rest) {
			return rest
		}
	}
	return desc
}

// codeWords spells a code's name as words: "ResourceExhausted" is
// "resource exhausted".
func codeWords(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}
