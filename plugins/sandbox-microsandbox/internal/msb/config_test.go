package msb

import "testing"

func TestConfigureAPIVersion(t *testing.T) {
	for _, v := range []string{"", "v0", "v2"} {
		diags, err := New(nil).Configure(t.Context(), nil, v)
		if err != nil || !diags.HasErrors() || diags[0].Summary != "Unsupported sandbox API version" {
			t.Errorf("Configure with API version %q = %+v, %v; want an error diagnostic", v, diags, err)
		}
	}
}
