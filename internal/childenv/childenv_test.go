package childenv

import (
	"slices"
	"testing"
)

func TestBuild(t *testing.T) {
	daemon := map[string]string{"PATH": "/opt/bin", "HOME": "/home/d", "API_KEY": "secret", "LANG": "C.UTF-8"}
	lookup := func(k string) (string, bool) { v, ok := daemon[k]; return v, ok }
	none := func(string) (string, bool) { return "", false }
	for _, tt := range []struct {
		name   string
		lookup func(string) (string, bool)
		layers []map[string]string
		want   []string
	}{
		{"allowlist only", lookup, nil, []string{"HOME=/home/d", "LANG=C.UTF-8", "PATH=/opt/bin"}},
		{"default PATH", none, nil, []string{"PATH=" + DefaultPath}},
		{"block adds a variable", none, []map[string]string{{"API_KEY": "given"}}, []string{"API_KEY=given", "PATH=" + DefaultPath}},
		{"block overrides PATH", lookup, []map[string]string{{"PATH": "/srv/bin"}}, []string{"HOME=/home/d", "LANG=C.UTF-8", "PATH=/srv/bin"}},
		{"later layer wins", none, []map[string]string{{"X": "1", "Y": "1"}, {"X": "2"}}, []string{"PATH=" + DefaultPath, "X=2", "Y=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Build(tt.lookup, tt.layers...); !slices.Equal(got, tt.want) {
				t.Errorf("Build = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBuildReadsTheProcessByDefault(t *testing.T) {
	t.Setenv("HOME", "/from/process")
	t.Setenv("CHILDENV_SECRET", "x")
	env := Build(nil)
	if Value(env, "HOME") != "/from/process" || Value(env, "CHILDENV_SECRET") != "" {
		t.Errorf("Build(nil) = %q", env)
	}
}

func TestValue(t *testing.T) {
	env := []string{"A=1", "B=x=y", "C="}
	for _, tt := range []struct{ key, want string }{{"A", "1"}, {"B", "x=y"}, {"C", ""}, {"D", ""}, {"", ""}} {
		if got := Value(env, tt.key); got != tt.want {
			t.Errorf("Value(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
