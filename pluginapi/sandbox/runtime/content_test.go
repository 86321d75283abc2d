package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// TestRichContent checks the runtime's side of rich content: call_tool
// turns the host's content envelope into Image, Audio, Resource and
// ResourceLink objects (texts as str, one item alone), leaves plain and
// escaped values as they are, read_resource returns Resource objects, and
// show sends images, bytes, files and text resources to the host.
func TestRichContent(t *testing.T) {
	r, _ := startZygote(t, Options{})
	var mu sync.Mutex
	var shown []map[string]any
	h := &recHost{fn: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "show":
			var p map[string]any
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, err
			}
			mu.Lock()
			shown = append(shown, p)
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		case "read_resource":
			return json.RawMessage(`[{"uri":"demo://t/1","mimeType":"text/plain","text":"hello"},{"uri":"demo://b/1","blob":"AAEC"}]`), nil
		}
		var p struct{ Tool string }
		_ = json.Unmarshal(params, &p)
		switch p.Tool {
		case "mixed":
			return json.RawMessage(`{"$cexec.content":[{"type":"text","text":"a tiny image"},
				{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
				{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},
				{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"A"}},
				{"type":"resource_link","uri":"demo://r/7","name":"r7","mimeType":"application/gzip"},
				{"type":"future","x":1}, {"type":"resource"}]}`), nil
		case "image":
			return json.RawMessage(`{"$cexec.content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}`), nil
		case "escaped":
			return json.RawMessage(`{"$cexec.value":{"$cexec.content":1}}`), nil
		}
		return json.RawMessage(`{"type":"image","data":"plain"}`), nil
	}}
	code := `import cexec
from cexec import call_tool, show, read_resource, Image, Audio, Resource, ResourceLink
items = call_tool("s", "mixed")
print([type(i).__name__ for i in items])
print(items[0], items[1], items[2], items[3], items[4])
assert items[1].data == b"\x89PNG\r\n\x1a\n" and items[1] == Image(b"\x89PNG\r\n\x1a\n", "image/png")
assert items[3].text == "A" and items[3].uri == "file:///a.txt"
assert items[4].server == "s" and items[5] == {"type": "future", "x": 1} and items[6] == {"type": "resource"}
img = call_tool("s", "image")
print(repr(img))
print(call_tool("s", "escaped"), call_tool("s", "plain"))
docs = read_resource("s", "demo://t/1")
print(docs[0].text, docs[1].data, docs[1].mime_type)
print(items[4].read()[0].text)
show(img)
show(b"GIF89a....", name="anim")
show(b"col\n1\n", mime_type="text/csv")
show(Resource("memo://1", "text/markdown", text="# hi"))
with open("chart.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\nrest")
show("chart.png")
for bad in (42, Resource):
    try:
        show(bad)
    except TypeError as e:
        print("TypeError:", e)
try:
    Resource("x")
except ValueError as e:
    print("ValueError:", e)
`
	res := exec1(t, r, code, h)
	out, errOut := h.out()
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", res.ExitCode, out, errOut)
	}
	want := []string{
		"['str', 'Image', 'Audio', 'Resource', 'ResourceLink', 'dict', 'dict']",
		"a tiny image Image(image/png, 8 bytes) Audio(audio/wav, 4 bytes) Resource('file:///a.txt', text/plain, 1 chars) ResourceLink('demo://r/7', application/gzip)",
		"Image(image/png, 8 bytes)",
		"{'$cexec.content': 1} {'type': 'image', 'data': 'plain'}",
		"hello b'\\x00\\x01\\x02' application/octet-stream",
		"hello",
		"TypeError: show: cannot show int; pass an Image, Audio, Resource, bytes or a file path",
		"TypeError: show: cannot show type; pass an Image, Audio, Resource, bytes or a file path",
		"ValueError: Resource: give exactly one of text and data",
	}
	if got := strings.Split(strings.TrimRight(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	wantShown := []string{
		`{"data":"iVBORw0KGgo=","kind":"image","mimeType":"image/png"}`,
		`{"data":"R0lGODlhLi4uLg==","kind":"image","mimeType":"image/gif","name":"anim"}`,
		`{"kind":"resource","mimeType":"text/csv","text":"col\n1\n"}`,
		`{"kind":"resource","mimeType":"text/markdown","text":"# hi","uri":"memo://1"}`,
		`{"data":"iVBORw0KGgpyZXN0","kind":"image","mimeType":"image/png","name":"chart.png"}`,
	}
	if len(shown) != len(wantShown) {
		t.Fatalf("shown %v, want %d items", shown, len(wantShown))
	}
	for i, p := range shown {
		got, _ := json.Marshal(p)
		if string(got) != wantShown[i] {
			t.Errorf("show %d: %s\nwant %s", i, got, wantShown[i])
		}
	}
}
