package bwrap

import (
	"encoding/binary"
	"fmt"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// Seccomp return values (linux/seccomp.h).
const (
	retKillProcess = 0x80000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000

	errnoEPERM  = 1
	errnoENOSYS = 38
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// deniedSyscalls fail with EPERM in every sandbox: debugging and memory
// access of other processes, mounts and namespaces, kernel keyrings, BPF,
// io_uring (which would bypass these very checks), perf, modules and
// kexec, clock and system administration. Names missing from the running
// architecture's table are skipped.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"unshare", "setns",
	"keyctl", "add_key", "request_key",
	"bpf", "userfaultfd", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module", "uselib", "nfsservctl",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
	"settimeofday", "clock_settime", "clock_adjtime", "stime",
	"syslog", "vhangup", "iopl", "ioperm", "vm86", "vm86old",
	"sethostname", "setdomainname", "ustat", "sysfs", "_sysctl",
	"migrate_pages", "move_pages", "open_tree_attr",
}

// Syscalls numbered alike on every architecture (since Linux 5.1) that are
// newer than the table of go-seccomp-bpf.
var extraDenied = map[string]uint32{"open_tree_attr": 467}

// Clone flags that create namespaces; clone with any of them is refused.
const cloneNamespaceFlags = 0x00020000 | // CLONE_NEWNS
	0x02000000 | // CLONE_NEWCGROUP
	0x04000000 | // CLONE_NEWUTS
	0x08000000 | // CLONE_NEWIPC
	0x10000000 | // CLONE_NEWUSER
	0x20000000 | // CLONE_NEWPID
	0x40000000 // CLONE_NEWNET

// ioctl requests that inject input into or control a terminal.
var deniedIoctls = []uint32{0x5412 /* TIOCSTI */, 0x541C /* TIOCLINUX */}

// Address families.
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
)

const x32SyscallBit = 0x40000000

// label-based program builder: jumps refer to labels resolved at the end,
// because classic BPF only has forward jumps with 8-bit offsets.
type program struct {
	insns  []bpf.Instruction
	labels map[string]int
	jumps  []jump
}

type jump struct {
	at      int
	cond    bpf.JumpTest
	val     uint32
	onTrue  string
	onFalse string
}

func (p *program) add(i bpf.Instruction) { p.insns = append(p.insns, i) }

func (p *program) label(name string) { p.labels[name] = len(p.insns) }

// jumpIf jumps to onTrue when the condition holds, else to onFalse ("" is
// the next instruction).
func (p *program) jumpIf(cond bpf.JumpTest, val uint32, onTrue, onFalse string) {
	p.jumps = append(p.jumps, jump{at: len(p.insns), cond: cond, val: val, onTrue: onTrue, onFalse: onFalse})
	p.add(bpf.JumpIf{})
}

func (p *program) assemble() ([]bpf.RawInstruction, error) {
	for _, j := range p.jumps {
		skip := func(name string) (uint8, error) {
			if name == "" {
				return 0, nil
			}
			target, ok := p.labels[name]
			if !ok {
				return 0, fmt.Errorf("seccomp: undefined label %s", name)
			}
			d := target - j.at - 1
			if d < 0 || d > 255 {
				return 0, fmt.Errorf("seccomp: jump to %s out of range (%d)", name, d)
			}
			return uint8(d), nil
		}
		t, err := skip(j.onTrue)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.onFalse)
		if err != nil {
			return nil, err
		}
		p.insns[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return bpf.Assemble(p.insns)
}

// argLow is the offset of the low 32 bits of syscall argument i.
func argLow(i int) uint32 {
	off := uint32(offArgs + 8*i)
	var probe [2]byte
	binary.NativeEndian.PutUint16(probe[:], 1)
	if probe[0] == 0 { // big endian: the high word comes first
		off += 4
	}
	return off
}

// seccompFilter builds the sandbox's filter for the running architecture:
// foreign system call ABIs kill the process, deniedSyscalls fail with
// EPERM, clone3 fails with ENOSYS (its flags are behind a pointer, so libc
// falls back to clone, whose flags are checked), namespace-creating clone
// flags, terminal injection ioctls and, without network, every socket
// family but AF_UNIX fail with EPERM. Everything else is allowed.
func seccompFilter(network bool) ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	nr := func(name string) (uint32, bool) {
		if n, ok := info.SyscallNames[name]; ok {
			return uint32(n), true
		}
		n, ok := extraDenied[name]
		return n, ok
	}
	p := &program{labels: map[string]int{}}
	p.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	p.jumpIf(bpf.JumpEqual, uint32(info.ID), "", "kill")
	p.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if info.ID == arch.X86_64.ID {
		p.jumpIf(bpf.JumpGreaterOrEqual, x32SyscallBit, "enosys", "")
	}
	for _, name := range deniedSyscalls {
		if n, ok := nr(name); ok {
			p.jumpIf(bpf.JumpEqual, n, "eperm", "")
		}
	}
	if n, ok := nr("clone3"); ok {
		p.jumpIf(bpf.JumpEqual, n, "enosys", "")
	}
	for _, c := range []struct{ name, label string }{{"socket", "socket"}, {"clone", "clone"}, {"ioctl", "ioctl"}} {
		n, ok := nr(c.name)
		if !ok {
			return nil, fmt.Errorf("seccomp: no %s system call on %s", c.name, info.Name)
		}
		p.jumpIf(bpf.JumpEqual, n, c.label, "")
	}
	p.add(bpf.RetConstant{Val: retAllow})

	p.label("socket")
	p.add(bpf.LoadAbsolute{Off: argLow(0), Size: 4})
	families := []uint32{afUnix}
	if network {
		families = append(families, afInet, afInet6, afNetlink)
	}
	for _, f := range families {
		p.jumpIf(bpf.JumpEqual, f, "allow", "")
	}
	p.add(bpf.RetConstant{Val: retErrno | errnoEPERM})

	p.label("clone")
	p.add(bpf.LoadAbsolute{Off: argLow(0), Size: 4})
	p.jumpIf(bpf.JumpBitsSet, cloneNamespaceFlags, "eperm", "allow")

	p.label("ioctl")
	p.add(bpf.LoadAbsolute{Off: argLow(1), Size: 4})
	for _, req := range deniedIoctls {
		p.jumpIf(bpf.JumpEqual, req, "eperm", "")
	}
	p.label("allow")
	p.add(bpf.RetConstant{Val: retAllow})
	p.label("eperm")
	p.add(bpf.RetConstant{Val: retErrno | errnoEPERM})
	p.label("enosys")
	p.add(bpf.RetConstant{Val: retErrno | errnoENOSYS})
	p.label("kill")
	p.add(bpf.RetConstant{Val: retKillProcess})
	return p.assemble()
}

// seccompBytes encodes a filter as the array of struct sock_filter that
// bwrap --seccomp reads.
func seccompBytes(prog []bpf.RawInstruction) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.NativeEndian.AppendUint16(b, in.Op)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b
}
