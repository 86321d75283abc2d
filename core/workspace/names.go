package workspace

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/cexec/cexec/pluginapi"
)

// Every name below becomes one path component on the host, so the patterns
// are allow-lists of ASCII: nothing that could walk out of a directory
// ("..", "/", "\", NUL), hide (a leading dot), look like an option (a
// leading "-") or compare differently after Unicode normalisation.
var (
	tenantRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	stateRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	skillRE   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// pythonKeywords cannot name a skill: `from skills.class import run` does not
// parse. Soft keywords (match, case, type, _) are fine as module names.
var pythonKeywords = map[string]bool{
	"and": true, "as": true, "assert": true, "async": true, "await": true, "break": true,
	"class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true,
	"except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true,
}

// ValidateTenantID checks a tenant id: 1-64 characters of a-z, 0-9, _ and -,
// starting with a letter or digit.
func ValidateTenantID(id string) error {
	if !tenantRE.MatchString(id) {
		return fmt.Errorf("invalid tenant id %q: use 1-64 characters of a-z, 0-9, _ and -, starting with a letter or digit: %w",
			clip(id), pluginapi.ErrInvalidArgument)
	}
	return nil
}

// State formats, from a state file's extension.
const (
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// ValidateStateName checks a state file name and returns its format: 1-128
// characters of A-Z, a-z, 0-9, ".", "_" and "-", starting with a letter or
// digit, ending in .json, .yaml or .yml. Pickle is refused on purpose:
// loading a pickle runs code, and the host would be the one loading it.
func ValidateStateName(name string) (format string, err error) {
	if !stateRE.MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("invalid state name %q: use 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit: %w",
			clip(name), pluginapi.ErrInvalidArgument)
	}
	switch path.Ext(name) {
	case ".json":
		return FormatJSON, nil
	case ".yaml", ".yml":
		return FormatYAML, nil
	case ".pkl", ".pickle":
		return "", fmt.Errorf("state %q: pickle is not supported by the state API because loading a pickle runs code; save JSON or YAML (sandboxed code may still write any file under /workspace/state itself): %w",
			name, pluginapi.ErrInvalidArgument)
	}
	return "", fmt.Errorf("state %q: the name must end in .json, .yaml or .yml: %w", name, pluginapi.ErrInvalidArgument)
}

// ValidateSessionID checks a session id: 1-128 characters of A-Z, a-z, 0-9,
// ".", "_" and "-", starting with a letter or digit (MCP session ids and
// UUIDs fit).
func ValidateSessionID(id string) error {
	if !sessionRE.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("invalid session id %q: use 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit: %w",
			clip(id), pluginapi.ErrInvalidArgument)
	}
	return nil
}

// ValidateSkillName checks a skill name: a lowercase snake_case Python
// identifier of at most 64 characters that is not a keyword, so that
// `from skills.<name> import ...` works.
func ValidateSkillName(name string) error {
	if !skillRE.MatchString(name) {
		return fmt.Errorf("invalid skill name %q: use a lowercase snake_case Python identifier (a-z, 0-9, _; starting with a letter; at most 64 characters): %w",
			clip(name), pluginapi.ErrInvalidArgument)
	}
	if pythonKeywords[name] {
		return fmt.Errorf("invalid skill name %q: it is a Python keyword: %w", name, pluginapi.ErrInvalidArgument)
	}
	return nil
}

// clip shortens a rejected name for an error message, so a megabyte of junk
// does not end up in logs.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
