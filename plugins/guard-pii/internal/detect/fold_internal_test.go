package detect

import (
	"testing"

	"github.com/cexec/cexec/internal/testutil/piitest"
)

// BenchmarkFold1MB is what folding adds to BenchmarkDetect1MB: text with
// nothing to fold is only searched for lead bytes.
func BenchmarkFold1MB(b *testing.B) {
	text := piitest.Mixed(1<<20, 1)[:1<<20]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, at := fold(text); at != nil {
			b.Fatal("the mixed text has something to fold")
		}
	}
}
