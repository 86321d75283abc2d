package bwrap

import (
	"encoding/binary"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// seccompData builds a struct seccomp_data for bpf.VM, which loads words
// big-endian: each 32-bit word is stored big-endian at the offset the
// filter reads it from.
func seccompData(auditArch uint32, nr uint32, args ...uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[argLow(i):], a)
	}
	return b
}

func TestSeccompFilter(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	sys := func(name string) uint32 {
		n, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %s", name)
		}
		return uint32(n)
	}
	const eperm, enosys = retErrno | errnoEPERM, retErrno | errnoENOSYS
	tests := []struct {
		name    string
		network bool
		data    []byte
		want    uint32
	}{
		{"read allowed", false, seccompData(uint32(info.ID), sys("read")), retAllow},
		{"ptrace denied", false, seccompData(uint32(info.ID), sys("ptrace")), eperm},
		{"mount denied", false, seccompData(uint32(info.ID), sys("mount")), eperm},
		{"umount2 denied", false, seccompData(uint32(info.ID), sys("umount2")), eperm},
		{"unshare denied", false, seccompData(uint32(info.ID), sys("unshare")), eperm},
		{"setns denied", false, seccompData(uint32(info.ID), sys("setns")), eperm},
		{"keyctl denied", false, seccompData(uint32(info.ID), sys("keyctl")), eperm},
		{"bpf denied", false, seccompData(uint32(info.ID), sys("bpf")), eperm},
		{"io_uring_setup denied", false, seccompData(uint32(info.ID), sys("io_uring_setup")), eperm},
		{"perf_event_open denied", false, seccompData(uint32(info.ID), sys("perf_event_open")), eperm},
		{"kexec_load denied", false, seccompData(uint32(info.ID), sys("kexec_load")), eperm},
		{"finit_module denied", false, seccompData(uint32(info.ID), sys("finit_module")), eperm},
		{"pivot_root denied", false, seccompData(uint32(info.ID), sys("pivot_root")), eperm},
		{"chroot denied", false, seccompData(uint32(info.ID), sys("chroot")), eperm},
		{"open_tree_attr denied", false, seccompData(uint32(info.ID), 467), eperm},
		{"clone3 unavailable", false, seccompData(uint32(info.ID), sys("clone3")), enosys},
		{"clone thread allowed", false, seccompData(uint32(info.ID), sys("clone"), 0x003d0f00), retAllow},
		{"clone newuser denied", false, seccompData(uint32(info.ID), sys("clone"), 0x10000000|17), eperm},
		{"clone newnet denied", false, seccompData(uint32(info.ID), sys("clone"), 0x40000000), eperm},
		{"unix socket allowed", false, seccompData(uint32(info.ID), sys("socket"), afUnix, 1), retAllow},
		{"inet socket denied", false, seccompData(uint32(info.ID), sys("socket"), afInet, 1), eperm},
		{"inet6 socket denied", false, seccompData(uint32(info.ID), sys("socket"), afInet6, 2), eperm},
		{"netlink socket denied", false, seccompData(uint32(info.ID), sys("socket"), afNetlink, 3), eperm},
		{"packet socket denied", false, seccompData(uint32(info.ID), sys("socket"), 17, 3), eperm},
		{"inet socket with network", true, seccompData(uint32(info.ID), sys("socket"), afInet, 1), retAllow},
		{"packet socket with network", true, seccompData(uint32(info.ID), sys("socket"), 17, 3), eperm},
		{"ptrace with network", true, seccompData(uint32(info.ID), sys("ptrace")), eperm},
		{"TIOCSTI denied", false, seccompData(uint32(info.ID), sys("ioctl"), 0, 0x5412), eperm},
		{"FIONREAD allowed", false, seccompData(uint32(info.ID), sys("ioctl"), 0, 0x541B), retAllow},
		{"foreign architecture killed", false, seccompData(0x40000003 /* AUDIT_ARCH_I386 */, 0), retKillProcess},
	}
	if info.ID == arch.X86_64.ID {
		tests = append(tests, struct {
			name    string
			network bool
			data    []byte
			want    uint32
		}{"x32 ABI refused", false, seccompData(uint32(info.ID), x32SyscallBit|sys("ptrace")), enosys})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := seccompFilter(tc.network)
			if err != nil {
				t.Fatal(err)
			}
			insns, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatal("filter has instructions bpf cannot disassemble")
			}
			vm, err := bpf.NewVM(insns)
			if err != nil {
				t.Fatal(err)
			}
			got, err := vm.Run(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != tc.want {
				t.Errorf("filter returned %#x, want %#x", uint32(got), tc.want)
			}
		})
	}
}

func TestSeccompBytes(t *testing.T) {
	raw, err := seccompFilter(false)
	if err != nil {
		t.Fatal(err)
	}
	b := seccompBytes(raw)
	if len(b) != 8*len(raw) || len(raw) > 4096 {
		t.Fatalf("%d bytes for %d instructions", len(b), len(raw))
	}
	if got := binary.NativeEndian.Uint32(b[4:8]); got != raw[0].K {
		t.Errorf("first instruction's k %#x, want %#x", got, raw[0].K)
	}
}
