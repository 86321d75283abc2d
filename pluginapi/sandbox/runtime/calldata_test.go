package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestCallDataOverFrame checks that tool call data too large for one frame
// fails that call with an error naming the limit, in both directions,
// instead of breaking the channel: the program catches it and its next
// call works.
func TestCallDataOverFrame(t *testing.T) {
	r, _ := startZygote(t, Options{})
	h := &recHost{fn: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
		var p struct{ Tool string }
		_ = json.Unmarshal(params, &p)
		if p.Tool == "huge" {
			return json.Marshal(strings.Repeat("r", MaxFrame))
		}
		return json.RawMessage(`"ok"`), nil
	}}
	code := `from cexec import call_tool, ToolError
for tool, args in [("echo", {"data": "a" * (65 << 20)}), ("huge", {})]:
    try:
        call_tool("s", tool, args)
        print(tool, "no error")
    except ToolError as e:
        print(tool, e.type, "|", e)
print(call_tool("s", "echo", {}))
`
	res := exec1(t, r, code, h)
	out, errOut := h.out()
	want := "echo ArgumentTooLarge | call_tool was not sent: its data is 65 MiB, over the 63 MiB a host call carries; send less data per call\n" +
		"huge ResultTooLarge | the result of call_tool is 64 MiB, over the 63 MiB a host call carries; ask for less per call\nok\n"
	if res.ExitCode != 0 || out != want {
		t.Errorf("stdout %q, want %q\nstderr %q result %+v", out, want, errOut, res)
	}
}
