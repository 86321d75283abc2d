package runtime

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
)

// codecCheck compares cexec._codec with the json module on values and
// on input each must refuse, and checks that loading the zygote imports
// neither json nor what json needs (the point of the codec).
const codecCheck = `
import sys
sys.path.insert(0, sys.argv[1])
import cexec._zygote
from cexec import _codec
heavy = [m for m in ("json", "re", "enum") if m in sys.modules]
assert not heavy, f"the zygote imports {heavy}"
import json

def same_error(f, g, x):
    try:
        f(x)
    except (ValueError, TypeError) as e:
        mine = e
    else:
        raise AssertionError(f"codec accepted {x!r}")
    try:
        g(x)
    except (ValueError, TypeError) as e:
        assert type(e) is type(mine) or isinstance(mine, ValueError) and isinstance(e, ValueError), (x, mine, e)
    else:
        raise AssertionError(f"json accepted {x!r}")

dumps = lambda v: json.dumps(v, separators=(",", ":"), allow_nan=False)
values = [
    {"op": "call", "id": 7, "method": "call_tool", "params": {"server": "s", "arguments": {"a": [1, 2.5, None, True, False]}}},
    "é\u2028\x00\"\\ \U0001f600", "\ud800", 1e300, -0.0, 12345678901234567890, [], {}, {"k": {"n": [{}]}},
    {1: 2, True: 3, None: 4, 1.5: 5},
]
for v in values:
    text = _codec.dumps(v)
    assert text == dumps(v), (v, text, dumps(v))
    assert _codec.loads(text.encode()) == json.loads(text.encode()), v
cycle = []
cycle.append(cycle)
for bad in [float("nan"), {"x": float("inf")}, {1j: 1}, object(), {1, 2}, cycle]:
    same_error(_codec.dumps, dumps, bad)
for bad in [b"", b"  ", b'{"a":1} x', b'{"a":', b"\xff", b"[1,]", b'"\x01"']:
    same_error(_codec.loads, json.loads, bad)
assert _codec.loads(b' \n{"a":1,"a":2}\t') == {"a": 2}
print("ok")
`

func TestCodecMatchesJSON(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s", python)
	}
	out, err := exec.Command(python, "-I", "-B", "-c", codecCheck, libDir(t)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("codec check: %v\n%s", err, out)
	}
}
