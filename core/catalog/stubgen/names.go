package stubgen

import (
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// pyKeywords are Python 3.11's hard keywords; soft keywords (match, case, _, type) are valid
// names.
var pyKeywords = setOf("False", "None", "True", "and", "as", "assert", "async", "await", "break",
	"class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from",
	"global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
	"return", "try", "while", "with", "yield")

// pyBuiltins are the names of Python 3.11's builtins module. A generated module-level name
// must not shadow them: agent code does `from servers.x import open` and then calls open().
var pyBuiltins = setOf("ArithmeticError", "AssertionError", "AttributeError", "BaseException",
	"BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning",
	"ChildProcessError", "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError",
	"ConnectionResetError", "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning",
	"EnvironmentError", "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError",
	"FloatingPointError", "FutureWarning", "GeneratorExit", "IOError", "ImportError",
	"ImportWarning", "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError",
	"KeyError", "KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError",
	"NameError", "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError",
	"OverflowError", "PendingDeprecationWarning", "PermissionError", "ProcessLookupError",
	"RecursionError", "ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning",
	"StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError",
	"SystemExit", "TabError", "TimeoutError", "TypeError", "UnboundLocalError",
	"UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError",
	"UnicodeWarning", "UserWarning", "ValueError", "Warning", "ZeroDivisionError", "abs", "aiter",
	"all", "anext", "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable",
	"chr", "classmethod", "compile", "complex", "copyright", "credits", "delattr", "dict", "dir",
	"divmod", "enumerate", "eval", "exec", "exit", "filter", "float", "format", "frozenset",
	"getattr", "globals", "hasattr", "hash", "help", "hex", "id", "input", "int", "isinstance",
	"issubclass", "iter", "len", "license", "list", "locals", "map", "max", "memoryview", "min",
	"next", "object", "oct", "open", "ord", "pow", "print", "property", "quit", "range", "repr",
	"reversed", "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum",
	"super", "tuple", "type", "vars", "zip")

// moduleNames are the names the generated modules themselves bind or import at module level.
var moduleNames = setOf("Any", "Literal", "NotRequired", "Required", "TypeAlias", "TypedDict",
	"TYPE_CHECKING", "cast", "call_tool", "cexec", "typing", "importlib")

// localArgs is the local variable that collects the arguments inside every stub function.
const localArgs = "_arguments"

// bodyNames are the global names a stub function's body refers to; a parameter with one of
// these names would shadow it (the return type's names are added per tool).
var bodyNames = setOf("call_tool", "cast", "Any", "dict", "str", localArgs)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// IsIdentifier reports whether s is an ASCII Python identifier that is not a hard keyword.
// Every name stubgen generates (package, module, function, parameter, type) satisfies it.
func IsIdentifier(s string) bool {
	if s == "" || pyKeywords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// asciiFold spells s in ASCII where Unicode compatibility decomposition allows it
// ("café" → "cafe", "ｆｏｏ" → "foo"); other runes stay as they are.
func asciiFold(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			var b strings.Builder
			for _, r := range norm.NFKD.String(s) {
				if !unicode.Is(unicode.Mn, r) {
					b.WriteRune(r)
				}
			}
			return b.String()
		}
	}
	return s
}

// identifier turns an MCP name into an ASCII Python identifier: characters outside
// [A-Za-z0-9_] become "_" and a leading digit gets a "_" prefix. Names with no letter or digit
// at all (say, all Chinese) become fallback. Keywords are handled by the namer.
func identifier(s, fallback string) string {
	s = asciiFold(s)
	var b strings.Builder
	alnum := false
	for _, r := range s {
		switch {
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if b.Len() == 0 && unicode.IsDigit(r) {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			alnum = true
		default:
			b.WriteByte('_')
		}
	}
	if !alnum {
		return fallback
	}
	return b.String()
}

// camel turns a name into a CamelCase identifier fragment for TypedDict names:
// "read_text_file" → "ReadTextFile", "entity-type" → "EntityType"; "" when nothing is left.
func camel(s string) string {
	s = asciiFold(s)
	var b strings.Builder
	up := true
	for _, r := range s {
		if r >= 0x80 || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// namer hands out unique identifiers in one namespace. Collisions get "_2", "_3", ... in the
// order names are claimed; callers claim in a deterministic order.
type namer struct {
	taken    map[string]bool
	reserved []map[string]bool // names Python would confuse, compared exactly (shared, read-only)
	fold     bool              // compare claimed names case-insensitively (they are file names)
}

func newNamer(fold bool, reserved ...map[string]bool) *namer {
	return &namer{taken: map[string]bool{}, reserved: reserved, fold: fold}
}

func (n *namer) key(s string) string {
	if n.fold {
		return strings.ToLower(s)
	}
	return s
}

func (n *namer) isReserved(name string) bool {
	for _, r := range n.reserved {
		if r[name] {
			return true
		}
	}
	return false
}

// free reports whether name may be claimed as it is.
func (n *namer) free(name string) bool {
	return IsIdentifier(name) && !n.isReserved(name) && !n.taken[n.key(name)] && !isDunder(name)
}

// claim returns name, or the first free variant of it: "_" appended when it is a keyword or
// reserved, a dunder name losing its first "_", then numeric suffixes.
func (n *namer) claim(name string) string {
	base := name
	if !IsIdentifier(base) && !pyKeywords[base] {
		base = identifier(base, "x")
	}
	for {
		if isDunder(base) {
			base = base[1:] // "__init__" → "_init__": no longer special
		} else if !IsIdentifier(base) || n.isReserved(base) {
			base += "_"
		} else {
			break
		}
	}
	cand := base
	for i := 2; n.taken[n.key(cand)]; i++ {
		cand = base + "_" + strconv.Itoa(i)
	}
	n.taken[n.key(cand)] = true
	return cand
}

// isDunder reports names like __init__ that Python treats specially at module level.
func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// assignNames gives each original name a unique identifier in n. Originals that already are
// free identifiers keep their spelling even if a sanitized name would have come first
// ("get_data" stays, "get-data" becomes get_data_2); the rest follow in the given order.
func assignNames(n *namer, originals []string, fallback string) []string {
	out := make([]string, len(originals))
	for i, o := range originals {
		if n.free(o) {
			out[i] = n.claim(o)
		}
	}
	for i, o := range originals {
		if out[i] == "" {
			out[i] = n.claim(identifier(o, fallback))
		}
	}
	return out
}
