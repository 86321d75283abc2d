package workspace

import (
	"errors"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

func TestValidateTenantID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"acme", true},
		{"a", true},
		{"0", true},
		{"team_1-x", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{".", false},
		{"..", false},
		{"../b", false},
		{"a/b", false},
		{`a\b`, false},
		{"/abs", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\tb", false},
		{"a\x7fb", false},
		{"Acme", false},
		{"ünï", false},
		{"а", false}, // Cyrillic a
		{"a\u200bb", false},
		{"a.b", false},
		{" a", false},
		{"a ", false},
		{"-a", false},
		{"_a", false},
		{"a:b", false},
		{"a*", false},
		{"%2e%2e", false},
	}
	for _, tc := range tests {
		err := ValidateTenantID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateTenantID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("ValidateTenantID(%q) error %v does not wrap ErrInvalidArgument", tc.id, err)
		}
	}
}

func TestValidateStateName(t *testing.T) {
	tests := []struct {
		name   string
		format string // "" = rejected
		errHas string
	}{
		{"progress.json", FormatJSON, ""},
		{"a.yaml", FormatYAML, ""},
		{"a.yml", FormatYAML, ""},
		{"Run_2026-01-01.v2.json", FormatJSON, ""},
		{strings.Repeat("a", 123) + ".json", FormatJSON, ""},
		{strings.Repeat("a", 124) + ".json", "", "invalid state name"},
		{"data.pkl", "", "pickle"},
		{"data.pickle", "", "pickle"},
		{"notes.txt", "", "must end in"},
		{"noext", "", "must end in"},
		{".json", "", "invalid state name"},
		{".hidden.json", "", "invalid state name"},
		{"../x.json", "", "invalid state name"},
		{"a/../../x.json", "", "invalid state name"},
		{"a..json", "", "invalid state name"},
		{"sub/x.json", "", "invalid state name"},
		{`sub\x.json`, "", "invalid state name"},
		{"/etc/passwd.json", "", "invalid state name"},
		{"x.json\x00", "", "invalid state name"},
		{"x\n.json", "", "invalid state name"},
		{"é.json", "", "invalid state name"},
		{"-x.json", "", "invalid state name"},
		{"", "", "invalid state name"},
		{"x.JSON", "", "must end in"},
	}
	for _, tc := range tests {
		format, err := ValidateStateName(tc.name)
		if format != tc.format {
			t.Errorf("ValidateStateName(%q) = %q, %v; want format %q", tc.name, format, err, tc.format)
		}
		if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("ValidateStateName(%q) error = %v, want it to mention %q", tc.name, err, tc.errHas)
		}
	}
}

func TestValidateSessionID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"mcp-session-0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"20260101T000000Z-0123456789abcdef", true},
		{"S.1_x", true},
		{NewSessionID(), true},
		{strings.Repeat("s", 128), true},
		{strings.Repeat("s", 129), false},
		{"", false},
		{"..", false},
		{"a..b", false},
		{".a", false},
		{"a/b", false},
		{`a\b`, false},
		{"a b", false},
		{"a\x00", false},
		{"ö", false},
	}
	for _, tc := range tests {
		if err := ValidateSessionID(tc.id); (err == nil) != tc.ok {
			t.Errorf("ValidateSessionID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}

func TestValidateSkillName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"csv_report", true},
		{"a", true},
		{"x2", true},
		{"match", true}, // a soft keyword imports fine
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"CsvReport", false},
		{"csv-report", false},
		{"2csv", false},
		{"_private", false},
		{"__init__", false},
		{"class", false},
		{"import", false},
		{"a.b", false},
		{"../x", false},
		{"a/b", false},
		{"ünï", false},
	}
	for _, tc := range tests {
		if err := ValidateSkillName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateSkillName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestNewSessionIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if seen[id] {
			t.Fatalf("NewSessionID repeated %s", id)
		}
		seen[id] = true
	}
}

func TestClipLongNames(t *testing.T) {
	err := ValidateTenantID(strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error for a huge id should be short, got %d bytes", len(err.Error()))
	}
}
