package workspace

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errWalkMoved means a folder was moved while the walk was inside it; the
// caller keeps its last figure and measures again later.
var errWalkMoved = errors.New("a folder moved during the walk")

// walkHook, when set (tests), runs at the start of every workspace walk.
var walkHook func()

// walkFrame is a folder the walk is inside: its identity, to check the way
// back up, and the names still to visit.
type walkFrame struct {
	dev, ino uint64
	names    []string
}

// walkUsage sums the sizes of every non-directory entry under root
// (apparent sizes; symlinks count their own size, never their target). It is
// iterative and holds one descriptor at a time: each folder is entered with
// openat relative to its parent and left through "..", checked against the
// parent's device and inode, so the cost is linear in the number of entries
// whatever the tree's depth, and a folder moved by sandboxed code meanwhile
// cannot lead the walk out of root. Entries that vanish during the walk are
// skipped.
func walkUsage(root *os.Root) (int64, error) {
	if walkHook != nil {
		walkHook()
	}
	top, err := root.Open(".")
	if err != nil {
		return 0, err
	}
	fd, err := unix.Openat(int(top.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	top.Close()
	if err != nil {
		return 0, err
	}
	frame, err := enterDir(fd)
	if err != nil {
		unix.Close(fd)
		return 0, err
	}
	stack := []walkFrame{frame}
	var total int64
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if len(f.names) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				break
			}
			up, err := leaveDir(fd, stack[len(stack)-1])
			unix.Close(fd)
			if err != nil {
				return 0, err
			}
			fd = up
			continue
		}
		name := f.names[0]
		f.names = f.names[1:]
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // vanished or unreadable
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			total += st.Size
			continue
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		cf, err := enterDir(child)
		if err != nil {
			unix.Close(child)
			continue
		}
		unix.Close(fd)
		fd = child
		stack = append(stack, cf)
	}
	unix.Close(fd)
	return total, nil
}

// enterDir reads the identity and names of the open folder fd; fd stays
// open.
func enterDir(fd int) (walkFrame, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return walkFrame{}, err
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return walkFrame{}, err
	}
	d := os.NewFile(uintptr(dup), "dir")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return walkFrame{}, err
	}
	return walkFrame{dev: st.Dev, ino: st.Ino, names: names}, nil
}

// leaveDir opens the parent of fd and checks that it is the folder the walk
// came from.
func leaveDir(fd int, parent walkFrame) (int, error) {
	up, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(up, &st); err != nil || st.Dev != parent.dev || st.Ino != parent.ino {
		unix.Close(up)
		if err == nil {
			err = errWalkMoved
		}
		return -1, fmt.Errorf("measure workspace: %w", err)
	}
	return up, nil
}
