package k8s

// linkDownName is the init container that cuts a pod without network off.
const linkDownName = "link-down"

// linkDownSrc takes every interface of the pod's network namespace but lo
// down with SIOCSIFFLAGS, then checks that none is up; a failure exits
// non-zero, so the pod never starts rather than starting connected. Taking
// an interface down also drops its routes: the pod has lo only. Python
// rather than ip(8): the image need only have the interpreter.
const linkDownSrc = `import fcntl, socket, struct, sys
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def flags(name):
    req = struct.pack("16sH22x", name.encode(), 0)
    return struct.unpack_from("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
names = [n for _, n in socket.if_nameindex() if n != "lo"]
for n in names:
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", n.encode(), flags(n) & ~IFF_UP))
up = [n for _, n in socket.if_nameindex() if n != "lo" and flags(n) & IFF_UP]
if up:
    sys.exit("still up: " + " ".join(up))
print("down:", " ".join(names) or "none")
`

// linkDownContainer runs linkDownSrc before the pod's containers start. The
// network namespace is the pod's, shared by all its containers and made
// before init containers run, so the cut holds for the sandbox and the
// loader. Only this container holds CAP_NET_ADMIN, which needs uid 0 (the
// kubelet gives non-root containers no effective capabilities); it exits
// before the sandbox starts, and the containers that stay have no
// capability to bring a link up again. pods/exec does not use the pod's
// network (it goes through the kubelet and the container runtime), so the
// runtime's stream and call_tool keep working.
func (p *podSpec) linkDownContainer() map[string]any {
	res := map[string]any{"memory": loaderMemory, "cpu": "100m"}
	sc := confined(map[string]any{
		"runAsUser":    int64(0),
		"runAsGroup":   int64(0),
		"runAsNonRoot": false,
	})
	sc["capabilities"] = map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_ADMIN"}}
	return map[string]any{
		"name":            linkDownName,
		"image":           p.image,
		"command":         []any{p.python, "-I", "-S", "-c", linkDownSrc},
		"resources":       map[string]any{"limits": res, "requests": res},
		"securityContext": sc,
	}
}
