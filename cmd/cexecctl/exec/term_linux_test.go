package exec

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIsTerminal: a pseudo-terminal is one; /dev/null, a character device,
// and a pipe are not, so `cexecctl exec` run by a script does not wait for
// answers nobody types.
func TestIsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !isTerminal(pts) {
		t.Error("a pseudo-terminal is not a terminal")
	}
	if isTerminal(null) || isTerminal(r) {
		t.Error("/dev/null or a pipe is taken for a terminal")
	}
}
