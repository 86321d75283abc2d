package detect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// labelledLine is one line of testdata/labelled.jsonl.
type labelledLine struct {
	Text  string `json:"text"`
	Spans []struct {
		Start int    `json:"start"`
		End   int    `json:"end"`
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"spans"`
	Note string `json:"note"`
}

func loadLabelled(t testing.TB) []labelledLine {
	t.Helper()
	f, err := os.Open("testdata/labelled.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []labelledLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l labelledLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("labelled.jsonl:%d: %v", n, err)
		}
		for _, s := range l.Spans {
			if s.Start < 0 || s.End > len(l.Text) || s.Start >= s.End || l.Text[s.Start:s.End] != s.Value {
				t.Fatalf("labelled.jsonl:%d: span %+v does not match its text", n, s)
			}
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// minPrecision and minRecall are the floors per type. The sample set is
// small (10 to 40 expected spans per type), so one miss moves a figure by
// 0.03 to 0.1; 0.9 allows a miss or two per type while failing on any
// systematic regression (a broken checksum, a filter that drops a whole
// format). The set was written alongside the detectors, so these figures
// say the detectors do what the set describes, not how they do on unseen
// text.
const (
	minPrecision = 0.9
	minRecall    = 0.9
)

// TestLabelledPrecisionRecall scores exact matches (same start, end and
// type) on the labelled set and logs a table per type.
func TestLabelledPrecisionRecall(t *testing.T) {
	lines := loadLabelled(t)
	d, err := detect.New(detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		start, end int
		typ        string
	}
	tp, fp, fn := map[string]int{}, map[string]int{}, map[string]int{}
	var misses []string
	for n, l := range lines {
		got, err := d.Detect(context.Background(), l.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[key]bool{}
		for _, s := range l.Spans {
			want[key{s.Start, s.End, s.Type}] = true
		}
		for _, s := range got {
			k := key{s.Start, s.End, s.Type}
			if want[k] {
				tp[s.Type]++
				delete(want, k)
				continue
			}
			fp[s.Type]++
			misses = append(misses, fmt.Sprintf("line %d (%s): unexpected %s %q", n+1, l.Note, s.Type, l.Text[s.Start:s.End]))
		}
		for k := range want {
			fn[k.typ]++
			misses = append(misses, fmt.Sprintf("line %d (%s): missed %s %q", n+1, l.Note, k.typ, l.Text[k.start:k.end]))
		}
	}
	for _, m := range misses {
		t.Log(m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-12s %5s %5s %5s %9s %7s\n", "type", "tp", "fp", "fn", "precision", "recall")
	var failed []string
	for _, typ := range detect.DefaultTypes {
		p := ratio(tp[typ], tp[typ]+fp[typ])
		r := ratio(tp[typ], tp[typ]+fn[typ])
		fmt.Fprintf(&b, "%-12s %5d %5d %5d %9.3f %7.3f\n", typ, tp[typ], fp[typ], fn[typ], p, r)
		if tp[typ]+fn[typ] == 0 {
			failed = append(failed, typ+": no expected spans in the set")
		}
		if p < minPrecision || r < minRecall {
			failed = append(failed, fmt.Sprintf("%s: precision %.3f recall %.3f", typ, p, r))
		}
	}
	t.Logf("labelled set: %d lines%s", len(lines), b.String())
	if len(failed) > 0 {
		t.Errorf("below the floor (precision %.2f, recall %.2f): %s", minPrecision, minRecall, strings.Join(failed, "; "))
	}
}

// ratio returns a/b, or 1 when b is 0 (no predictions: nothing wrong).
func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}
