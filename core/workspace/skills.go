package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

// A skill is a folder skills/<name>/ holding SKILL.md (YAML front matter with
// name and description, then instructions in Markdown) and __init__.py (the
// code), so that `from skills.<name> import run` works once /workspace and
// /cexec are on PYTHONPATH: `skills` itself has no __init__.py and is a
// namespace package spanning the tenant's /workspace/skills and the shared,
// read-only /cexec/skills.
const (
	skillsDir   = "skills"
	skillMD     = "SKILL.md"
	skillCode   = "__init__.py"
	maxSkillMD  = 256 << 10
	maxSkillSrc = 1 << 20
	maxDescLen  = 1024
	// pythonTimeout bounds the syntax check of one skill.
	pythonTimeout = 10 * time.Second
)

// Skill describes a skill. List fills the first fields; Get also the
// contents.
type Skill struct {
	Name        string
	Description string
	// Shared skills come from the repository's skills/ folder and are
	// read-only. A tenant's own skill wins over a shared one of the same
	// name (SaveSkill refuses to create such a clash, but a shared skill
	// may be added later).
	Shared bool
	// Dir is the folder on the host; SandboxPath where sandboxed code sees
	// it; Import the module to import.
	Dir         string
	SandboxPath string
	Import      string
	// Instructions is the Markdown body of SKILL.md.
	Instructions string
	// Code is the module's source (__init__.py).
	Code string
	// Files are the folder's other files, relative to it.
	Files []string
	// Problem says why a folder with a SKILL.md is not a usable skill
	// (BrokenSkills only).
	Problem string
}

// CodeError is skill code that does not compile. It wraps
// pluginapi.ErrInvalidArgument.
type CodeError struct {
	Line, Column int
	Msg          string
	// Text is the offending source line.
	Text string
}

// Error says where the code fails to compile.
func (e *CodeError) Error() string {
	if e.Line == 0 {
		return "the code does not compile: " + e.Msg
	}
	s := fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	if e.Text != "" {
		s += fmt.Sprintf(" (%s)", cutText(e.Text, 200))
	}
	return s
}

// Unwrap makes errors.Is(err, pluginapi.ErrInvalidArgument) hold.
func (e *CodeError) Unwrap() error { return pluginapi.ErrInvalidArgument }

// ListSkills lists the tenant's skills and the shared ones, sorted by name;
// a tenant's skill hides a shared one of the same name. Folders without a
// valid SKILL.md are left out (BrokenSkills lists them).
func (t *Tenant) ListSkills() ([]Skill, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	byName := map[string]Skill{}
	for _, s := range t.m.SharedSkills() {
		byName[s.Name] = s
	}
	own, _ := listSkillDir(t.ws, skillsDir, false, filepath.Join(t.WorkspaceDir(), skillsDir))
	for _, s := range own {
		byName[s.Name] = s
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// BrokenSkills lists the tenant's skill folders whose SKILL.md does not
// make a skill (no front matter, a name that is not the folder's …), sorted
// by name, each with its Problem: ListSkills leaves them out, and whoever
// wrote one by hand needs to hear why.
func (t *Tenant) BrokenSkills() ([]Skill, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	_, broken := listSkillDir(t.ws, skillsDir, false, filepath.Join(t.WorkspaceDir(), skillsDir))
	return broken, nil
}

// GetSkill returns a skill with its instructions, code and file list: the
// tenant's own if it has one of that name, else the shared one.
func (t *Tenant) GetSkill(name string) (Skill, error) {
	if err := ValidateSkillName(name); err != nil {
		return Skill{}, err
	}
	if err := t.enter(); err != nil {
		return Skill{}, err
	}
	defer t.exit()
	s, err := readSkill(t.ws, skillsDir, name, false, filepath.Join(t.WorkspaceDir(), skillsDir), true)
	if errors.Is(err, fs.ErrNotExist) {
		return t.m.SharedSkill(name)
	}
	if err != nil {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	return s, nil
}

// SharedSkills lists the shared skills, sorted by name: all a tenant that
// was never used has.
func (m *Manager) SharedSkills() []Skill {
	shared := m.sharedRoot()
	if shared == nil {
		return nil
	}
	defer shared.Close()
	out, _ := listSkillDir(shared, ".", true, m.opts.SharedSkillsDir)
	return out
}

// SharedSkill returns a shared skill with its instructions, code and file
// list.
func (m *Manager) SharedSkill(name string) (Skill, error) {
	if err := ValidateSkillName(name); err != nil {
		return Skill{}, err
	}
	s, err := Skill{}, error(fs.ErrNotExist)
	if shared := m.sharedRoot(); shared != nil {
		defer shared.Close()
		s, err = readSkill(shared, ".", name, true, m.opts.SharedSkillsDir, true)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return Skill{}, fmt.Errorf("skill %s: %w", name, pluginapi.ErrNotFound)
	}
	if err != nil {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	return s, nil
}

// SaveSkill checks and stores a tenant skill: the name (a lowercase Python
// identifier, not a shared skill's), the description, and the code, which
// must compile (py_compile; it is never run). SKILL.md is written with
// usage instructions listing the code's public functions. The folder is
// written aside and swapped in atomically, within the disk quota; on any
// error nothing changed. The skill is importable in the next execution as
// skills.<name>.
func (t *Tenant) SaveSkill(ctx context.Context, name, description, code string) (Skill, error) {
	if err := ValidateSkillName(name); err != nil {
		return Skill{}, err
	}
	description = strings.TrimSpace(description)
	if description == "" || len(description) > maxDescLen || !utf8.ValidString(description) ||
		strings.ContainsFunc(description, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' }) {
		return Skill{}, fmt.Errorf("skill %s: the description must be 1-%d characters of text: %w", name, maxDescLen, pluginapi.ErrInvalidArgument)
	}
	if len(code) > maxSkillSrc {
		return Skill{}, fmt.Errorf("skill %s: the code is %s; the limit is %s: %w", name, bytesize.Format(int64(len(code))), bytesize.Format(maxSkillSrc), ErrTooLarge)
	}
	if strings.TrimSpace(code) == "" {
		return Skill{}, fmt.Errorf("skill %s: the code is empty: %w", name, pluginapi.ErrInvalidArgument)
	}
	if shared := t.m.sharedRoot(); shared != nil {
		_, err := shared.Lstat(path.Join(name, skillMD))
		shared.Close()
		if err == nil {
			return Skill{}, fmt.Errorf("skill %s: a shared skill has that name; shared skills are read-only, so pick another name: %w", name, pluginapi.ErrInvalidArgument)
		}
	}
	info, err := t.m.checkPython(ctx, code)
	if err != nil {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	md, err := renderSkillMD(name, description, info)
	if err != nil {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	if !strings.HasSuffix(code, "\n") {
		code += "\n"
	}

	if err := t.enter(); err != nil {
		return Skill{}, err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	target := path.Join(skillsDir, name)
	var old int64
	if sub, err := t.ws.OpenRoot(target); err == nil {
		old, _ = walkUsage(sub)
		sub.Close()
	} else if st, err := t.ws.Lstat(target); err == nil {
		old = st.Size()
	}
	size := int64(len(md) + len(code))
	if err := t.reserve("skill "+name, old, size); err != nil {
		return Skill{}, err
	}
	if err := t.swapInSkill(name, md, []byte(code)); err != nil {
		return Skill{}, fmt.Errorf("tenant %s: save skill %s: %w", t.id, name, err)
	}
	t.wrote(size - old)
	if r := t.m.opts.Skills; r != nil {
		// The skill is saved and every replica reads it from the shared
		// folder; a registry that missed it must not hide that.
		if err := r.RegisterSkill(ctx, t.id, name, description); err != nil {
			t.m.log.Warn("skill not registered", "tenant", t.id, "skill", name, "error", err)
		}
	}
	return Skill{
		Name: name, Description: description,
		Dir:         filepath.Join(t.WorkspaceDir(), skillsDir, name),
		SandboxPath: SandboxWorkspace + "/" + skillsDir + "/" + name,
		Import:      "skills." + name,
		Code:        code,
		Files:       []string{skillMD, skillCode},
	}, nil
}

// swapInSkill writes the folder under a temporary name, then renames it over
// (or atomically exchanges it with) the old one. Called with t.wmu held.
func (t *Tenant) swapInSkill(name string, md, code []byte) error {
	tmp := tempName(name)
	tmpPath := path.Join(skillsDir, tmp)
	own := t.owner
	defer t.ws.RemoveAll(tmpPath) // after the exchange it holds the old version
	if err := mkdirs(t.ws, own, tmpPath); err != nil {
		return err
	}
	if err := writeAtomic(t.ws, tmpPath, skillMD, md, atomicWrite{sync: syncFileAndDir, own: own}); err != nil {
		return err
	}
	if err := writeAtomic(t.ws, tmpPath, skillCode, code, atomicWrite{sync: syncFileAndDir, own: own}); err != nil {
		return err
	}
	target := path.Join(skillsDir, name)
	_, err := t.ws.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = t.ws.Rename(tmpPath, target)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			err = exchange(t.ws, skillsDir, tmp, name) // created meanwhile by sandboxed code
		}
	case err == nil:
		err = exchange(t.ws, skillsDir, tmp, name)
	}
	if err != nil {
		return err
	}
	return syncDir(t.ws, skillsDir)
}

// DeleteSkill removes one of the tenant's skills. Shared skills are
// read-only.
func (t *Tenant) DeleteSkill(name string) error {
	if err := ValidateSkillName(name); err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	target := path.Join(skillsDir, name)
	if _, err := t.ws.Lstat(target); err != nil {
		if shared := t.m.sharedRoot(); shared != nil {
			_, serr := shared.Lstat(name)
			shared.Close()
			if serr == nil {
				return fmt.Errorf("skill %s is a shared skill, which is read-only: %w", name, pluginapi.ErrDenied)
			}
		}
		return fmt.Errorf("skill %s: %w", name, pluginapi.ErrNotFound)
	}
	// Rename first so the skill disappears at once, then delete.
	aside := path.Join(skillsDir, tempName(name))
	if err := t.ws.Rename(target, aside); err != nil {
		return fmt.Errorf("tenant %s: delete skill %s: %w", t.id, name, err)
	}
	if err := t.ws.RemoveAll(aside); err != nil {
		return fmt.Errorf("tenant %s: delete skill %s: %w", t.id, name, err)
	}
	t.remeasure()
	t.touch()
	return nil
}

// sharedRoot opens the shared skills folder, or returns nil when there is
// none. Opening it per call keeps a replaced checkout visible.
func (m *Manager) sharedRoot() *os.Root {
	if m.opts.SharedSkillsDir == "" {
		return nil
	}
	r, err := os.OpenRoot(m.opts.SharedSkillsDir)
	if err != nil {
		m.log.Warn("open shared skills folder", "dir", m.opts.SharedSkillsDir, "error", err)
		return nil
	}
	return r
}

// listSkillDir reads the skill folders of dir inside root, sorted by name:
// the skills, and the folders whose SKILL.md makes none, with the problem.
func listSkillDir(root *os.Root, dir string, shared bool, hostDir string) (skills, broken []Skill) {
	d, err := root.Open(dir)
	if err != nil {
		return nil, nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	slices.Sort(names)
	for _, n := range names {
		if ValidateSkillName(n) != nil {
			continue
		}
		s, err := readSkill(root, dir, n, shared, hostDir, false)
		switch {
		case err == nil:
			skills = append(skills, s)
		case !errors.Is(err, fs.ErrNotExist): // a folder without SKILL.md claims nothing
			broken = append(broken, Skill{Name: n, Shared: shared, Problem: err.Error()})
		}
	}
	return skills, broken
}

// readSkill reads dir/name inside root; full also reads the code and lists
// the files.
func readSkill(root *os.Root, dir, name string, shared bool, hostDir string, full bool) (Skill, error) {
	folder := path.Join(dir, name)
	data, err := readRegular(root, path.Join(folder, skillMD), maxSkillMD)
	if err != nil {
		return Skill{}, err
	}
	fm, body, err := parseSkillMD(data)
	if err != nil {
		return Skill{}, fmt.Errorf("%s: %w", skillMD, err)
	}
	if fm.Name != name {
		return Skill{}, fmt.Errorf("%s names the skill %q, but its folder is %q", skillMD, fm.Name, name)
	}
	s := Skill{
		Name: name, Description: fm.Description, Shared: shared,
		Dir:         filepath.Join(hostDir, name),
		SandboxPath: SandboxWorkspace + "/" + skillsDir + "/" + name,
		Import:      "skills." + name,
	}
	if shared {
		s.SandboxPath = SandboxSharedSkills + "/" + name
	}
	if !full {
		return s, nil
	}
	s.Instructions = body
	if code, err := readRegular(root, path.Join(folder, skillCode), maxSkillSrc); err == nil {
		s.Code = string(code)
	}
	if sub, err := root.OpenRoot(folder); err == nil {
		_ = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__" {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if len(s.Files) >= 200 {
				return fs.SkipAll
			}
			if !d.IsDir() {
				s.Files = append(s.Files, p)
			}
			return nil
		})
		sub.Close()
	}
	return s, nil
}

type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// parseSkillMD splits SKILL.md into its front matter and Markdown body.
func parseSkillMD(data []byte) (frontMatter, string, error) {
	var fm frontMatter
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return fm, "", errors.New("no YAML front matter: the file must start with a --- line")
	}
	head, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		head, ok = strings.CutSuffix(rest, "\n---")
		if !ok {
			return fm, "", errors.New("the front matter has no closing --- line")
		}
	}
	// The bounded reader first: the file may come from sandboxed code, and
	// yaml.Unmarshal alone limits neither aliases nor nesting.
	if _, err := yamlToJSON([]byte(head), maxSkillMD); err != nil {
		return fm, "", fmt.Errorf("front matter: %s", inFile(err))
	}
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		return fm, "", fmt.Errorf("front matter: %s", inFile(err))
	}
	fm.Description = strings.TrimSpace(fm.Description)
	if fm.Name == "" || fm.Description == "" {
		return fm, "", errors.New("the front matter needs a name and a description")
	}
	return fm, strings.TrimLeft(body, "\n"), nil
}

// yamlLine is how YAML errors give a line.
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// inFile is a front matter error with its lines counted in SKILL.md, where
// the front matter starts on the second line.
func inFile(err error) string {
	return yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(m[len("line "):])
		return "line " + strconv.Itoa(n+1)
	})
}

// pyInfo is what the syntax check learns about skill code.
type pyInfo struct {
	Doc       string   `json:"doc"`
	Functions []pyFunc `json:"functions"`
	Error     string   `json:"error"`
	Line      int      `json:"line"`
	Column    int      `json:"col"`
	Text      string   `json:"text"`
}

type pyFunc struct {
	Signature string `json:"signature"`
	Doc       string `json:"doc"`
	Name      string `json:"name"`
}

// pyCheck compiles the code read from stdin (compile() is what py_compile
// does, minus writing a .pyc; nothing is executed) and reports the module's
// public functions and classes, or the first error with its line.
const pyCheck = `import ast, json, sys
src = sys.stdin.buffer.read()
try:
    compile(src, "__init__.py", "exec", dont_inherit=True)
    tree = ast.parse(src)
except SyntaxError as e:
    out = {"error": e.msg, "line": e.lineno or 0, "col": e.offset or 0, "text": (e.text or "").strip()}
except (ValueError, RecursionError, MemoryError) as e:
    out = {"error": str(e) or type(e).__name__}
else:
    def first(doc):
        lines = (doc or "").strip().splitlines()
        return lines[0] if lines else ""
    fns = []
    for n in tree.body:
        if getattr(n, "name", "_").startswith("_"):
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fns.append({"name": n.name, "signature": n.name + "(" + ast.unparse(n.args) + ")", "doc": first(ast.get_docstring(n))})
        elif isinstance(n, ast.ClassDef):
            fns.append({"name": n.name, "signature": "class " + n.name, "doc": first(ast.get_docstring(n))})
    out = {"functions": fns, "doc": first(ast.get_docstring(tree))}
sys.stdout.write(json.dumps(out))
`

// checkPython runs the syntax check with the configured interpreter,
// isolated (-I: no environment, no user site) and without site (-S).
func (m *Manager) checkPython(ctx context.Context, code string) (pyInfo, error) {
	py, err := filepath.EvalSymlinks(m.opts.Python)
	if err != nil {
		return pyInfo{}, fmt.Errorf("find python to check the code: %w: %w", err, pluginapi.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-I", "-S", "-B", "-c", pyCheck)
	cmd.Stdin = strings.NewReader(code)
	cmd.Env = []string{"LC_ALL=C.UTF-8"}
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return pyInfo{}, fmt.Errorf("check code: %w", ctx.Err())
		}
		return pyInfo{}, fmt.Errorf("check code with %s: %w: %s", py, err, cutText(strings.TrimSpace(stderr.String()), 500))
	}
	var info pyInfo
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil {
		return pyInfo{}, fmt.Errorf("check code with %s: unreadable answer: %w", py, err)
	}
	if info.Error != "" {
		return pyInfo{}, &CodeError{Line: info.Line, Column: info.Column, Msg: info.Error, Text: info.Text}
	}
	return info, nil
}

// renderSkillMD writes SKILL.md for a saved skill: front matter, then
// instructions generated from the code's public names.
func renderSkillMD(name, description string, info pyInfo) ([]byte, error) {
	head, err := yaml.Marshal(frontMatter{Name: name, Description: description})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("---\n")
	b.Write(head)
	b.WriteString("---\n\n# " + name + "\n\n" + description + "\n")
	if info.Doc != "" && info.Doc != description {
		b.WriteString("\n" + info.Doc + "\n")
	}
	var names []string
	for _, f := range info.Functions {
		names = append(names, f.Name)
	}
	b.WriteString("\n## Usage\n\n```python\n")
	if len(names) > 0 {
		b.WriteString("from skills." + name + " import " + strings.Join(names, ", ") + "\n")
	} else {
		b.WriteString("import skills." + name + "\n")
	}
	b.WriteString("```\n")
	if len(info.Functions) > 0 {
		b.WriteString("\n## API\n\n")
		for _, f := range info.Functions {
			b.WriteString("- `" + f.Signature + "`")
			if f.Doc != "" {
				b.WriteString(": " + f.Doc)
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes(), nil
}
