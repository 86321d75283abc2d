package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

func home() string {
	if h := os.Getenv("MSB_HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".microsandbox")
}

// record is a sandbox as the fake keeps it.
type record struct {
	Name      string            `json:"name"`
	Status    string            `json:"status"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Image     string            `json:"image"`
	CPUs      int               `json:"cpus"`
	MemoryMiB int               `json:"memory_mib"`
	Env       [][2]string       `json:"env"`
	Mounts    []mount           `json:"mounts"`
	Labels    map[string]string `json:"labels"`
	NoNet     bool              `json:"no_net"`
	Workdir   string            `json:"workdir"`
	Root      string            `json:"root"`
	// Execs are the pids of fake msb exec processes running commands in
	// the sandbox (each a child subreaper of what it started).
	Execs []int `json:"execs"`
}

type mount struct {
	Type     string `json:"type"`
	Host     string `json:"host,omitempty"`
	Guest    string `json:"guest"`
	ReadOnly bool   `json:"readonly"`
	SizeMiB  int    `json:"size_mib,omitempty"`
}

func stateDir() string { return filepath.Join(home(), "fake") }

// locked runs fn holding the state lock.
func locked(fn func() int) int {
	if err := os.MkdirAll(filepath.Join(stateDir(), "sandboxes"), 0o755); err != nil {
		return fail(err.Error())
	}
	f, err := os.OpenFile(filepath.Join(stateDir(), "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fail(err.Error())
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fail(err.Error())
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return fn()
}

func recordPath(name string) string {
	return filepath.Join(stateDir(), "sandboxes", strings.ReplaceAll(name, "/", "_")+".json")
}

func load(name string) (*record, error) {
	data, err := os.ReadFile(recordPath(name))
	if err != nil {
		return nil, err
	}
	var r record
	return &r, json.Unmarshal(data, &r)
}

func save(r *record) error {
	r.UpdatedAt = time.Now().UTC()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := recordPath(r.Name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, recordPath(r.Name))
}

func all() []*record {
	paths, _ := filepath.Glob(filepath.Join(stateDir(), "sandboxes", "*.json"))
	var out []*record
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if r, err := load(name); err == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hostPath maps a guest path to where it lives on this machine: under a
// mount's source, or under the sandbox's root directory when the root has
// its first component (directories holding mount targets, --mkdir ones).
func (r *record) hostPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	best := -1
	for i, m := range r.Mounts {
		if m.Type == "Bind" && (p == m.Guest || strings.HasPrefix(p, m.Guest+"/")) && (best < 0 || len(m.Guest) > len(r.Mounts[best].Guest)) {
			best = i
		}
	}
	if best >= 0 {
		m := r.Mounts[best]
		return m.Host + strings.TrimPrefix(p, m.Guest)
	}
	first := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	if first != "" {
		if _, err := os.Lstat(filepath.Join(r.Root, first)); err == nil {
			return filepath.Join(r.Root, p)
		}
	}
	return p
}

// hostList maps each element of a colon-separated path list.
func (r *record) hostList(v string) string {
	parts := strings.Split(v, ":")
	for i, p := range parts {
		parts[i] = r.hostPath(p)
	}
	return strings.Join(parts, ":")
}

// hostPackages maps the directories of a CEXEC_PACKAGES value
// ("name=dir:dir;name=dir").
func (r *record) hostPackages(v string) string {
	pkgs := strings.Split(v, ";")
	for i, p := range pkgs {
		if name, dirs, ok := strings.Cut(p, "="); ok {
			pkgs[i] = name + "=" + r.hostList(dirs)
		}
	}
	return strings.Join(pkgs, ";")
}

func hasLabels(r *record, labels []string) bool {
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
