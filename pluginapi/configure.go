package pluginapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NegotiateAPIVersion picks the highest API version ("v<N>") that both the
// host and the plugin list. The host calls it with the versions a plugin
// reports in Info; ok is false when they share none.
func NegotiateAPIVersion(host, plugin []string) (version string, ok bool) {
	best, bestN := "", -1
	for _, v := range plugin {
		n, valid := apiVersionNumber(v)
		if valid && n > bestN && slices.Contains(host, v) {
			best, bestN = v, n
		}
	}
	return best, bestN >= 0
}

// apiVersionNumber parses "v<N>".
func apiVersionNumber(v string) (int, bool) {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// CheckAPIVersion is every plugin's answer to the API version the host chose
// in Configure: nothing when the plugin implements it, else one error
// diagnostic naming both sides. The host always chooses one of the versions
// the plugin listed in Info, so an empty or unknown version means a host
// that skipped negotiation, which a plugin must not guess its way past.
func CheckAPIVersion(kind Kind, supported []string, chosen string) Diagnostics {
	if slices.Contains(supported, chosen) {
		return nil
	}
	return Diagnostics{Errorf("", "Unsupported "+string(kind)+" API version",
		fmt.Sprintf("the host chose %q; this plugin speaks %s", chosen, strings.Join(supported, ", ")))}
}

// DecodeConfig decodes a plugin's configuration (the JSON the host made of
// its cexec.hcl block) into v, strictly: an attribute v has no field for is
// an error, so a misspelt attribute is reported rather than ignored. Empty
// or null leaves v as it is, with its defaults. The diagnostic names the
// attribute where encoding/json says which one was wrong; plugin is the
// name used in its detail ("the pii guard has no attribute ...").
func DecodeConfig(plugin string, raw json.RawMessage, v any) Diagnostics {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Diagnostics{decodeDiagnostic(plugin, err)}
	}
	return nil
}

func decodeDiagnostic(plugin string, err error) Diagnostic {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return Errorf(te.Field, "Invalid type", fmt.Sprintf("%s: got a JSON %s, want %s", te.Field, te.Value, te.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return Errorf(name, "Unsupported attribute", fmt.Sprintf("%s has no attribute %q", plugin, name))
	}
	return Errorf("", "Invalid "+plugin+" configuration", err.Error())
}
