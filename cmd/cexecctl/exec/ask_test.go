package exec

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestPrompter(t *testing.T) {
	form := `{"message":"Approve?","requestedSchema":{"type":"object","required":["approve"],"properties":{
		"approve":{"type":"boolean","title":"Approve fs/rm"},
		"count":{"type":"integer","default":3},
		"color":{"type":"string","enum":["red","blue"]},
		"note":{"type":"string"}}}}`
	for _, tc := range []struct {
		name, params, input, want string
	}{
		{"accept, with retries of bad answers and defaults", form, "x\na\n\nmaybe\nyes\ngreen\nblue\nseven\n\n\n",
			`{"action":"accept","content":{"approve":true,"color":"blue","count":3}}`},
		{"decline", form, "d\n", `{"action":"decline"}`},
		{"cancel", form, "cancel\n", `{"action":"cancel"}`},
		{"url mode", `{"mode":"url","message":"Sign in","url":"https://example.com/x"}`, "a\n", `{"action":"accept"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p := newPrompter(strings.NewReader(tc.input), &out)
			got, err := p.ask(context.Background(), tc.params)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal([]byte(got), &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if gb, _ := json.Marshal(g); string(gb) != mustJSON(w) {
				t.Errorf("answer %s, want %s\nprompts:\n%s", got, tc.want, out.String())
			}
		})
	}
	p := newPrompter(strings.NewReader("a\n"), &strings.Builder{})
	if _, err := p.ask(context.Background(), form); err == nil {
		t.Error("input ended mid-form: no error")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
