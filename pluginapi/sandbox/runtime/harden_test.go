package runtime

import "testing"

// dumpableProgram prints whether the process may be dumped (and so traced,
// and its /proc files read, by its own user), which a child inherits from
// the zygote with its memory, and whether the zygote imported _ctypes. It
// imports ctypes itself after that check.
const dumpableProgram = "import sys\nimported = '_ctypes' in sys.modules\nimport ctypes\nprint(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), imported)"

// TestZygoteIsNotDumpable: with a readable interpreter, the zygote makes
// itself non-dumpable with prctl (through _ctypes). With an execute-only
// one the kernel does it at exec, without _ctypes: the bwrap backend's
// suite covers that, since root, which runs these tests, may read any file.
func TestZygoteIsNotDumpable(t *testing.T) {
	r, _ := startZygote(t, Options{})
	h := &recHost{}
	res := exec1(t, r, dumpableProgram, h)
	if out, _ := h.out(); out != "0 True\n" || res.ExitCode != 0 {
		t.Errorf("stdout %q (want \"0 True\\n\"), result %+v", out, res)
	}
}
