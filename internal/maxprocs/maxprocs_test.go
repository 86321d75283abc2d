package maxprocs

import (
	"runtime"
	"testing"
)

func TestSet(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	for _, tc := range []struct {
		name  string
		env   string
		procs int
		want  int
	}{
		{"halves", "", 8, 4},
		{"rounds down", "", 3, 1},
		{"at least one", "", 1, 1},
		{"environment chose", "8", 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			runtime.GOMAXPROCS(tc.procs)
			if got := Set(); got != tc.want || runtime.GOMAXPROCS(0) != tc.want {
				t.Errorf("Set() = %d, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), tc.want)
			}
		})
	}
}
