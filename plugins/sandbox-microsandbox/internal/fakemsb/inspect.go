package main

import (
	"fmt"
)

// inspect is `msb inspect`, as text or as msb 0.7.2's JSON.
func inspect(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format"}, nil)
	if f == nil {
		return unknownFlag("inspect", bad, "msb inspect [OPTIONS] <NAME>")
	}
	if len(f.pos) != 1 {
		return usageError("error: the following required arguments were not provided:\n  <NAME>", "msb inspect <NAME>")
	}
	r, err := load(f.pos[0])
	if err != nil {
		return fail("sandbox not found: " + f.pos[0])
	}
	if f.last("format") != "json" {
		fmt.Printf("Name:    %s\nStatus:  %s\nImage:   %s\nCPUs:    %d\nMemory:  %d MiB\n", r.Name, r.Status, r.Image, r.CPUs, r.MemoryMiB)
		return 0
	}
	env := []map[string]string{}
	for _, kv := range r.Env {
		env = append(env, map[string]string{"key": kv[0], "value": kv[1]})
	}
	mounts := []map[string]any{}
	for _, m := range r.Mounts {
		opts := map[string]bool{"nodev": false, "noexec": false, "nosuid": false, "readonly": m.ReadOnly}
		if m.Type == "Tmpfs" {
			mounts = append(mounts, map[string]any{"type": "Tmpfs", "guest": m.Guest, "size_mib": m.SizeMiB, "options": opts})
			continue
		}
		mounts = append(mounts, map[string]any{"type": "Bind", "host": m.Host, "guest": m.Guest, "options": opts,
			"follow_root_symlinks": false, "host_permissions": "private", "quota_mib": nil, "stat_virtualization": "strict"})
	}
	egress := "allow"
	if r.NoNet {
		egress = "deny"
	}
	var workdir any
	if r.Workdir != "" {
		workdir = r.Workdir
	}
	cfg := map[string]any{
		"deployment_profile": "single_tenant",
		"env":                env,
		"image":              map[string]any{"Oci": map[string]any{"reference": r.Image}},
		"labels":             r.Labels,
		"lifecycle":          map[string]any{"ephemeral": false, "idle_timeout_secs": nil, "max_duration_secs": nil},
		"mounts":             mounts,
		"name":               r.Name,
		"network":            map[string]any{"enabled": true, "policy": map[string]any{"default_egress": egress, "default_ingress": "deny", "rules": []any{}}},
		"resources":          map[string]any{"cpus": r.CPUs, "max_cpus": r.CPUs, "memory_mib": r.MemoryMiB, "max_memory_mib": r.MemoryMiB},
		"runtime":            map[string]any{"cmd": nil, "entrypoint": nil, "hostname": nil, "shell": "/bin/sh", "user": nil, "workdir": workdir},
		"security_profile":   "default",
	}
	return printJSON(map[string]any{"active_config": nil, "config": cfg, "created_at": jsonTime(r.CreatedAt), "name": r.Name,
		"pause": nil, "pending_changes": []any{}, "status": r.Status, "updated_at": jsonTime(r.UpdatedAt)})
}
