package msb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/proctree"
)

// legacySandbox is one sandbox of legacyServer: its volumes, and the
// commands and REPL it runs on this machine.
type legacySandbox struct {
	name    string
	volumes map[string]string // guest path -> host path
	envs    []string
	memory  int64

	mu    sync.Mutex
	procs map[*exec.Cmd]bool
	repl  *legacyREPL
}

// guestPath rewrites a guest path under one of the volumes.
func (sb *legacySandbox) guestPath(p string) string {
	for guest, host := range sb.volumes {
		if p == guest || strings.HasPrefix(p, guest+"/") {
			return host + strings.TrimPrefix(p, guest)
		}
	}
	return p
}

var envArg = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

func (sb *legacySandbox) arg(a string) string {
	if loc := envArg.FindStringIndex(a); loc != nil {
		parts := strings.Split(a[loc[1]:], ":")
		for i, x := range parts {
			parts[i] = sb.guestPath(x)
		}
		return a[:loc[1]] + strings.Join(parts, ":")
	}
	if strings.HasPrefix(a, "/") {
		return sb.guestPath(a)
	}
	return a
}

type line struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// command runs one command as the portal does: stdin closed, output
// collected line by line, killed after timeout seconds.
func (sb *legacySandbox) command(name string, args []string, timeout int64) (int, []line, error) {
	for i, a := range args {
		args[i] = sb.arg(a)
	}
	if name == "python3" {
		name = python
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, sb.envs...)
	if ws, ok := sb.volumes[guestWorkspace]; ok {
		cmd.Dir = ws
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	sb.track(cmd, true)
	defer sb.track(cmd, false)
	var mu sync.Mutex
	var lines []line
	var wg sync.WaitGroup
	for stream, r := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 64<<20)
			for sc.Scan() {
				mu.Lock()
				lines = append(lines, line{stream, sc.Text()})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	var limit <-chan time.Time
	if timeout > 0 {
		limit = time.After(time.Duration(timeout) * time.Second)
	}
	select {
	case <-done:
	case <-limit:
		killTree(cmd.Process.Pid)
		<-done
		_ = cmd.Wait()
		return 0, nil, errors.New("command timed out")
	}
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if code < 0 {
			code = 1
		}
	}
	return code, lines, nil
}

func (sb *legacySandbox) track(cmd *exec.Cmd, on bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if on {
		sb.procs[cmd] = true
	} else {
		delete(sb.procs, cmd)
	}
}

// kill ends everything the sandbox runs, as the VM's end does.
func (sb *legacySandbox) kill() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for cmd := range sb.procs {
		killTree(cmd.Process.Pid)
	}
	if sb.repl != nil {
		killTree(sb.repl.cmd.Process.Pid)
	}
}

// rss sums the resident memory of the sandbox's processes.
func (sb *legacySandbox) rss() int64 {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var total int64
	for cmd := range sb.procs {
		for _, pid := range append(proctree.Descendants(cmd.Process.Pid), cmd.Process.Pid) {
			data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
			if err != nil {
				continue
			}
			if f := strings.Fields(string(data)); len(f) > 1 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				total += n * int64(os.Getpagesize())
			}
		}
	}
	return total
}

// legacyREPL is the portal's Python engine: one `python3 -i` per sandbox.
type legacyREPL struct {
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan line
	mu    sync.Mutex
}

func (sb *legacySandbox) replRun(code string, timeout int64) ([]line, error) {
	sb.mu.Lock()
	if sb.repl == nil {
		cmd := exec.Command(python, "-q", "-u", "-i", "-c", "import sys; sys.ps1=sys.ps2=''")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, sb.envs...)
		if ws, ok := sb.volumes[guestWorkspace]; ok {
			cmd.Dir = ws
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			sb.mu.Unlock()
			return nil, err
		}
		r := &legacyREPL{cmd: cmd, stdin: stdin, lines: make(chan line, 1024)}
		for stream, rd := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
			go func() {
				sc := bufio.NewScanner(rd)
				sc.Buffer(make([]byte, 64<<10), 64<<20)
				for sc.Scan() {
					r.lines <- line{stream, sc.Text()}
				}
			}()
		}
		sb.repl = r
	}
	r := sb.repl
	sb.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	marker := fmt.Sprintf("eoe_%d", time.Now().UnixNano())
	if !strings.HasSuffix(code, "\n") {
		code += "\n"
	}
	if _, err := io.WriteString(r.stdin, code+"\nprint('"+marker+"')\n"); err != nil {
		return nil, err
	}
	var limit <-chan time.Time
	if timeout > 0 {
		limit = time.After(time.Duration(timeout) * time.Second)
	}
	var out []line
	for {
		select {
		case l := <-r.lines:
			if l.Stream == "stdout" && strings.TrimSpace(l.Text) == marker {
				// Let stderr written just before catch up.
				time.Sleep(20 * time.Millisecond)
				for {
					select {
					case l := <-r.lines:
						out = append(out, l)
					default:
						return out, nil
					}
				}
			}
			out = append(out, l)
		case <-limit:
			return nil, errors.New("execution timed out")
		}
	}
}

// killTree kills pid and every process below it.
func killTree(pid int) {
	proctree.KillDescendants(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
