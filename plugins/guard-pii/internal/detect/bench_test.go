package detect_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

const oneMB = 1 << 20

func benchDetect(b *testing.B, opts detect.Options, text string) {
	d, err := detect.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	spans, err := d.Detect(ctx, text, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(spans)), "spans")
	b.SetBytes(int64(len(text)))
	cpu0 := testutil.ProcessCPU()
	for b.Loop() {
		if _, err := d.Detect(ctx, text, nil); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := testutil.ProcessCPU() - cpu0; cpu > 0 {
		// CPU includes the garbage collector's background work.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDetect1MB runs every default detector over 1 MiB of mixed prose,
// logs, JSON, CSV and code (see piitest.Mixed).
func BenchmarkDetect1MB(b *testing.B) {
	benchDetect(b, detect.Options{}, piitest.Mixed(oneMB, 1)[:oneMB])
}

// BenchmarkDetect1MBDense runs over the labelled set repeated to 1 MiB:
// PII and near-misses on every line, the worst case for the phone library.
func BenchmarkDetect1MBDense(b *testing.B) {
	var sb strings.Builder
	lines := loadLabelled(b)
	for sb.Len() < oneMB {
		for _, l := range lines {
			sb.WriteString(l.Text)
			sb.WriteByte('\n')
		}
	}
	benchDetect(b, detect.Options{}, sb.String()[:oneMB])
}

// BenchmarkDetectByType runs one detector at a time over the mixed text, to
// show where the time goes.
func BenchmarkDetectByType(b *testing.B) {
	text := piitest.Mixed(oneMB, 1)[:oneMB]
	for _, typ := range detect.DefaultTypes {
		b.Run(typ, func(b *testing.B) {
			benchDetect(b, detect.Options{Types: []string{typ}}, text)
		})
	}
}
