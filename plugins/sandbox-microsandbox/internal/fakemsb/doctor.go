package main

import (
	"fmt"
	"os"
	"strings"
)

// problems lists what doctor finds wrong, as the real one checks it.
func problems() [][]string {
	var out [][]string
	cpuinfo := envOr("FAKEMSB_CPUINFO", "/proc/cpuinfo")
	data, _ := os.ReadFile(cpuinfo)
	hasVirt := false
	for _, w := range strings.Fields(string(data)) {
		if w == "vmx" || w == "svm" {
			hasVirt = true
		}
	}
	if !hasVirt {
		out = append(out, []string{"CPU virtualization is not available", "no vmx (Intel) or svm (AMD) flag in /proc/cpuinfo",
			"enable virtualization (VT-x / AMD-V) in your BIOS or UEFI firmware", "inside a VM, enable nested virtualization on the host"})
	}
	kvm := envOr("FAKEMSB_KVM", "/dev/kvm")
	if _, err := os.Stat(kvm); err != nil {
		out = append(out, []string{"/dev/kvm is not present", "the KVM kernel module is not loaded",
			"in containers or CI, the host must expose /dev/kvm to this environment"})
	} else if f, err := os.OpenFile(kvm, os.O_RDWR, 0); err != nil {
		out = append(out, []string{"/dev/kvm could not be opened", fmt.Sprintf("opening /dev/kvm failed: %v", err)})
	} else {
		f.Close()
	}
	return out
}

// doctor is `msb doctor`: it checks for hardware virtualisation and KVM
// as the real one does, on the test knobs' files.
func doctor() int {
	self, _ := os.Executable()
	probs := problems()
	fmt.Fprintf(os.Stderr, "info Platform: Linux x86_64\ninfo Version: v%s\ninfo MSB_HOME: %s\n", version, home())
	fmt.Fprintf(os.Stderr, "   ✓ msb          %s\n", self)
	mark := func(ok bool) string {
		if ok {
			return "✓"
		}
		return "✗"
	}
	virt, kvm := true, true
	for _, p := range probs {
		if strings.HasPrefix(p[0], "CPU") {
			virt = false
		} else {
			kvm = false
		}
	}
	fmt.Fprintf(os.Stderr, "   %s CPU virt     %s\n", mark(virt), map[bool]string{true: "vmx", false: "not found"}[virt])
	fmt.Fprintf(os.Stderr, "   %s KVM device   %s\n", mark(kvm), map[bool]string{true: "/dev/kvm", false: "missing"}[kvm])
	for _, p := range probs {
		fail(p[0], p[1:]...)
	}
	if len(probs) > 0 {
		return 1
	}
	return 0
}

// bootFailure says why a boot fails here, or nil.
func bootFailure() []string {
	if os.Getenv("FAKEMSB_BOOT_FAIL") != "" || len(problems()) > 0 {
		return []string{"other: sandbox process exited (exit status: 1) before agent relay became available"}
	}
	return nil
}
