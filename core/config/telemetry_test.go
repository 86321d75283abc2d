package config

import (
	"strings"
	"testing"
)

func TestTelemetryFixture(t *testing.T) {
	env := fakeEnv(map[string]string{"CEXEC_TEST_TOKEN": "s3cret-token"})
	cfg, diags := Load("testdata/telemetry.hcl", Overrides{LookupEnv: env})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tr := cfg.Telemetry.Traces
	if tr == nil {
		t.Fatal("no traces config")
	}
	if tr.Endpoint != "https://otel.example.com:4318" || tr.Protocol != "http" || tr.SampleRatio != 0.5 || tr.Insecure != nil {
		t.Errorf("traces = %+v", tr)
	}
	if tr.Headers["x-api-key"] != "s3cret-token" {
		t.Errorf("headers = %v", tr.Headers)
	}
	js, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "s3cret-token") {
		t.Errorf("masked config shows the header value: %s", js)
	}
	if !strings.Contains(string(js), `"x-api-key"`) {
		t.Errorf("masked config lacks the header name: %s", js)
	}
}

func TestTelemetryBlock(t *testing.T) {
	tests := []struct {
		name, src string
		on        bool
		ratio     float64
	}{
		{"absent", ``, false, 0},
		{"telemetry without traces", "telemetry {}\n", false, 0},
		{"empty traces: env and defaults", "telemetry {\n traces {}\n}\n", true, 1},
		{"grpc on loopback", "telemetry {\n traces {\n endpoint = \"127.0.0.1:4317\"\n protocol = \"grpc\"\n sample_ratio = 0\n }\n}\n", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), "t.hcl", Overrides{LookupEnv: fakeEnv(nil)})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			tr := cfg.Telemetry.Traces
			if (tr != nil) != tt.on {
				t.Fatalf("traces = %+v, want on=%v", tr, tt.on)
			}
			if tr != nil && tr.SampleRatio != tt.ratio {
				t.Errorf("sample_ratio = %v, want %v", tr.SampleRatio, tt.ratio)
			}
		})
	}
}
