package daemon

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/internal/version"
)

// startTracing turns tracing on when cexec.hcl asks for it, before the
// plugins and upstream clients that it instruments are built. stop flushes
// the spans still batched, within grace; the daemon calls it last.
func startTracing(ctx context.Context, cfg *config.Config, grace time.Duration, log hclog.Logger) (stop func(), err error) {
	log = log.Named("telemetry")
	shutdown, err := telemetry.Setup(ctx, cfg.Telemetry.Traces, telemetry.Options{
		ServiceName: "cexecd", ServiceVersion: version.Version, Log: log,
	})
	if err != nil {
		return func() {}, err
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		if err := shutdown(stopCtx); err != nil {
			log.Warn("traces not all exported at shutdown", "error", err)
		}
	}, nil
}
