package config

import (
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Telemetry is the `telemetry { ... }` block.
type Telemetry struct {
	// Traces is nil when the block has no traces block: tracing is off and
	// costs nothing.
	Traces *Traces
}

// Traces is `telemetry { traces { ... } }`: OpenTelemetry traces exported
// over OTLP. Unset attributes fall back to the standard OTEL_EXPORTER_OTLP_*
// variables of cexecd's environment, then to the exporter's defaults.
type Traces struct {
	// Endpoint is host:port or a URL ("" leaves it to
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
	// Protocol is "grpc" or "http" (OTLP/HTTP protobuf); "" means
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL, else grpc.
	Protocol string
	// Insecure sends without TLS. An endpoint URL's scheme decides
	// (http:// plain, https:// TLS); a bare host:port is plain on a
	// loopback address and TLS elsewhere unless insecure says otherwise.
	Insecure *bool
	// SampleRatio is the share of new traces kept (0..1); a request that
	// arrives with a sampled parent follows its parent.
	SampleRatio float64
	// Headers are sent with every export (an API key, say); their values
	// are never shown.
	Headers   map[string]string
	DeclRange hcl.Range
}

type rawTelemetry struct {
	Traces    *rawTraces `hcl:"traces,block"`
	DeclRange hcl.Range  `hcl:",def_range"`
}

type rawTraces struct {
	Endpoint    *hcl.Attribute `hcl:"endpoint,optional"`
	Protocol    *hcl.Attribute `hcl:"protocol,optional"`
	Insecure    *hcl.Attribute `hcl:"insecure,optional"`
	SampleRatio *hcl.Attribute `hcl:"sample_ratio,optional"`
	Headers     *hcl.Attribute `hcl:"headers,optional"`
	DeclRange   hcl.Range      `hcl:",def_range"`
}

func (d *decoder) telemetry(cfg *Config, raw *rawTelemetry) {
	if raw == nil || raw.Traces == nil {
		return
	}
	r := raw.Traces
	tr := &Traces{SampleRatio: 1, DeclRange: r.DeclRange}
	if s, marked, ok := d.str(r.Endpoint, path("telemetry", "traces", "endpoint")); ok {
		if err := checkOTLPEndpoint(s); err != nil {
			d.errorf(r.Endpoint.Expr.Range().Ptr(), "Invalid endpoint", "%s is not an OTLP endpoint: %v. Write host:port (127.0.0.1:4317) or a URL (https://otel.example.com:4318).", shown(s, marked), err)
		} else {
			tr.Endpoint = s
		}
	}
	if s, _, ok := d.str(r.Protocol, path("telemetry", "traces", "protocol")); ok {
		if s != "grpc" && s != "http" {
			d.errorf(r.Protocol.Expr.Range().Ptr(), "Invalid protocol", "%q is not an OTLP protocol: use \"grpc\" (port 4317) or \"http\" (protobuf over HTTP, port 4318).", s)
		} else {
			tr.Protocol = s
		}
	}
	if b, ok := d.boolean(r.Insecure, path("telemetry", "traces", "insecure")); ok {
		tr.Insecure = &b
	}
	if v, _, ok := d.eval(r.SampleRatio, cty.Number, path("telemetry", "traces", "sample_ratio")); ok {
		f, _ := v.AsBigFloat().Float64()
		if v.AsBigFloat().Cmp(big.NewFloat(0)) < 0 || v.AsBigFloat().Cmp(big.NewFloat(1)) > 0 {
			d.errorf(r.SampleRatio.Expr.Range().Ptr(), "Number out of range", "\"sample_ratio\" is the share of traces kept, from 0 to 1; got %g.", f)
		} else {
			tr.SampleRatio = f
		}
	}
	if m, ok := d.strMap(r.Headers, path("telemetry", "traces", "headers")); ok {
		for k := range m {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				d.errorf(r.Headers.Expr.Range().Ptr(), "Invalid header name", "%q is not an HTTP header name.", k)
			}
		}
		tr.Headers = m
	}
	cfg.Telemetry.Traces = tr
}

// checkOTLPEndpoint accepts host:port or an http(s) URL with a host.
func checkOTLPEndpoint(s string) error {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return err
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("the scheme must be http or https, not %q", u.Scheme)
		}
		if u.Host == "" {
			return fmt.Errorf("the URL has no host")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" || port == "" {
		return fmt.Errorf("host and port are both needed")
	}
	return nil
}

// maskedTelemetry is the telemetry block for MaskedJSON: header values are
// always masked, since they usually carry credentials.
func (c *Config) maskedTelemetry() any {
	t := c.Telemetry.Traces
	if t == nil {
		return map[string]any{"traces": nil}
	}
	headers := map[string]any{}
	for k := range t.Headers {
		headers[k] = maskedValue
	}
	traces := map[string]any{"endpoint": t.Endpoint, "protocol": t.Protocol, "sample_ratio": t.SampleRatio, "headers": headers}
	if t.Insecure != nil {
		traces["insecure"] = *t.Insecure
	}
	return map[string]any{"traces": traces}
}
