package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

const wordCount = `"""Count words."""

import re


def run(text: str, *, lower: bool = True) -> dict[str, int]:
    """Count how often each word occurs in text.

    More detail here.
    """
    counts: dict[str, int] = {}
    for word in re.findall(r"\w+", text.lower() if lower else text):
        counts[word] = counts.get(word, 0) + 1
    return counts


async def fetch(url):
    return url


class Counter:
    """A reusable counter."""


def _helper():
    pass
`

func TestSaveSkill(t *testing.T) {
	m := newManager(t, Options{SharedSkillsDir: repoSkills(t)})
	tn := mustTenant(t, m, "acme")
	s, err := tn.SaveSkill(context.Background(), "word_count", "Count words in a text.", wordCount)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tn.WorkspaceDir(), "skills", "word_count")
	if s.Dir != dir || s.SandboxPath != "/workspace/skills/word_count" || s.Import != "skills.word_count" || s.Shared {
		t.Errorf("SaveSkill = %+v", s)
	}
	code, _ := os.ReadFile(filepath.Join(dir, "__init__.py"))
	if string(code) != wordCount {
		t.Errorf("__init__.py differs from the code")
	}
	md, _ := os.ReadFile(filepath.Join(dir, "SKILL.md"))
	for _, want := range []string{
		"---\nname: word_count\ndescription: Count words in a text.\n---\n",
		"from skills.word_count import run, fetch, Counter\n",
		"- `run(text: str, *, lower: bool=True)`: Count how often each word occurs in text.\n",
		"- `fetch(url)`\n",
		"- `class Counter`: A reusable counter.\n",
		"Count words.\n",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("SKILL.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "_helper") {
		t.Error("SKILL.md lists a private function")
	}

	got, err := tn.GetSkill("word_count")
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "Count words in a text." || got.Code != wordCount || !strings.HasPrefix(got.Instructions, "# word_count\n") ||
		!slices.Equal(got.Files, []string{"SKILL.md", "__init__.py"}) {
		t.Errorf("GetSkill = %+v", got)
	}

	// Saving again replaces the folder as a whole.
	if _, err := tn.SaveSkill(context.Background(), "word_count", "Version two.", "def run():\n    return 2\n"); err != nil {
		t.Fatal(err)
	}
	got, _ = tn.GetSkill("word_count")
	if got.Description != "Version two." || !strings.Contains(got.Code, "return 2") {
		t.Errorf("after replace: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(tn.WorkspaceDir(), "skills"))
	if len(entries) != 1 {
		t.Errorf("skills folder holds %v, want only word_count", entries)
	}

	list, err := tn.ListSkills()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
		if s.Shared != (s.Name != "word_count") {
			t.Errorf("%s: Shared = %v", s.Name, s.Shared)
		}
	}
	if !slices.Equal(names, []string{"csv_report", "json_query", "text_diff", "word_count"}) {
		t.Errorf("ListSkills = %v", names)
	}
}

func TestSaveSkillRejects(t *testing.T) {
	m := newManager(t, Options{SharedSkillsDir: repoSkills(t)})
	tn := mustTenant(t, m, "acme")
	tests := []struct {
		name, skill, desc, code string
		is                      error
		errHas                  string
	}{
		{"syntax error", "broken", "d", "def f(:\n    pass\n", pluginapi.ErrInvalidArgument, "line 1: "},
		{"indentation", "broken", "d", "def f():\nreturn 1\n", pluginapi.ErrInvalidArgument, "line 2: expected an indented block"},
		{"return outside function", "broken", "d", "x = 1\nreturn x\n", pluginapi.ErrInvalidArgument, "line 2: 'return' outside function"},
		{"nonlocal at module level", "broken", "d", "nonlocal x\n", pluginapi.ErrInvalidArgument, "line 1: nonlocal declaration not allowed at module level"},
		{"null byte", "broken", "d", "x = 1\x00\n", pluginapi.ErrInvalidArgument, "null bytes"},
		{"empty code", "empty", "d", "  \n", pluginapi.ErrInvalidArgument, "empty"},
		{"huge code", "huge", "d", strings.Repeat("#", maxSkillSrc+1), ErrTooLarge, ""},
		{"no description", "nodesc", " ", "x = 1\n", pluginapi.ErrInvalidArgument, "description"},
		{"control characters", "ctl", "a\x1b[31mb", "x = 1\n", pluginapi.ErrInvalidArgument, "description"},
		{"long description", "long", strings.Repeat("d", maxDescLen+1), "x = 1\n", pluginapi.ErrInvalidArgument, "description"},
		{"bad name", "Bad-Name", "d", "x = 1\n", pluginapi.ErrInvalidArgument, "snake_case"},
		{"path name", "../x", "d", "x = 1\n", pluginapi.ErrInvalidArgument, "snake_case"},
		{"keyword", "class", "d", "x = 1\n", pluginapi.ErrInvalidArgument, "keyword"},
		{"shared name", "csv_report", "d", "x = 1\n", pluginapi.ErrInvalidArgument, "shared skill"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tn.SaveSkill(context.Background(), tc.skill, tc.desc, tc.code)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("SaveSkill = %v; want %v mentioning %q", err, tc.is, tc.errHas)
			}
		})
	}
	var ce *CodeError
	_, err := tn.SaveSkill(context.Background(), "broken", "d", "a = 1\nb = (\n")
	if !errors.As(err, &ce) || ce.Line == 0 {
		t.Errorf("unclosed paren: %v, want a CodeError with a line", err)
	}
	entries, _ := os.ReadDir(filepath.Join(tn.WorkspaceDir(), "skills"))
	if len(entries) != 0 {
		t.Errorf("rejected skills left %v", entries)
	}
}

func TestSkillQuota(t *testing.T) {
	m := newManager(t, Options{DefaultQuota: Quota{DiskBytes: 1000}})
	tn := mustTenant(t, m, "acme")
	code := "x = '" + strings.Repeat("y", 900) + "'\n"
	_, err := tn.SaveSkill(context.Background(), "big", "Too big.", code)
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("SaveSkill over quota = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(tn.WorkspaceDir(), "skills")); len(entries) != 0 {
		t.Errorf("rejected skill left %v", entries)
	}
	if _, err := tn.SaveSkill(context.Background(), "small", "Small.", "x = 1\n"); err != nil {
		t.Fatal(err)
	}
	u, _ := tn.DiskUsage()
	if u2, _ := tn.CheckQuota(); u2 != u {
		t.Errorf("cached usage %d, measured %d", u, u2)
	}
}

func TestSkillClashAndDamage(t *testing.T) {
	shared := t.TempDir()
	m := newManager(t, Options{SharedSkillsDir: shared})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.SaveSkill(context.Background(), "dup", "The tenant's.", "x = 1\n"); err != nil {
		t.Fatal(err)
	}
	// A shared skill of the same name appears later: the tenant's wins.
	writeFile(t, filepath.Join(shared, "dup", "SKILL.md"), []byte("---\nname: dup\ndescription: The shared one.\n---\nBody\n"))
	writeFile(t, filepath.Join(shared, "other", "SKILL.md"), []byte("---\nname: other\ndescription: Shared.\n---\n"))
	writeFile(t, filepath.Join(shared, "other", "__init__.py"), []byte("y = 2\n"))
	got, err := tn.GetSkill("dup")
	if err != nil || got.Description != "The tenant's." || got.Shared {
		t.Errorf("GetSkill(dup) = %+v, %v; want the tenant's", got, err)
	}
	list, _ := tn.ListSkills()
	if len(list) != 2 || list[0].Description != "The tenant's." || !list[1].Shared || list[1].SandboxPath != "/cexec/skills/other" {
		t.Errorf("ListSkills = %+v", list)
	}
	if err := tn.DeleteSkill("other"); !errors.Is(err, pluginapi.ErrDenied) {
		t.Errorf("DeleteSkill(shared) = %v, want ErrDenied", err)
	}
	if err := tn.DeleteSkill("dup"); err != nil {
		t.Fatal(err)
	}
	if got, _ := tn.GetSkill("dup"); !got.Shared {
		t.Errorf("after deleting the tenant's dup, GetSkill = %+v; want the shared one", got)
	}
	if err := tn.DeleteSkill("nope"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("DeleteSkill(nope) = %v", err)
	}

	// Folders sandboxed code damaged are left out, not fatal.
	skills := filepath.Join(tn.WorkspaceDir(), "skills")
	writeFile(t, filepath.Join(skills, "nofm", "SKILL.md"), []byte("# no front matter\n"))
	writeFile(t, filepath.Join(skills, "wrongname", "SKILL.md"), []byte("---\nname: other\ndescription: d\n---\n"))
	writeFile(t, filepath.Join(skills, "nodesc", "SKILL.md"), []byte("---\nname: nodesc\n---\n"))
	writeFile(t, filepath.Join(skills, "Not_Valid", "SKILL.md"), []byte("---\nname: Not_Valid\ndescription: d\n---\n"))
	list, err = tn.ListSkills()
	if err != nil || len(list) != 2 {
		t.Errorf("ListSkills with damaged folders = %+v, %v", list, err)
	}
	if _, err := tn.GetSkill("wrongname"); err == nil || !strings.Contains(err.Error(), "folder") {
		t.Errorf("GetSkill(wrongname) = %v", err)
	}
	// … and listed with their problems, for whoever wrote them by hand.
	broken, err := tn.BrokenSkills()
	var problems []string
	for _, b := range broken {
		problems = append(problems, b.Name+": "+b.Problem)
	}
	want := []string{
		"nodesc: SKILL.md: the front matter needs a name and a description",
		"nofm: SKILL.md: no YAML front matter: the file must start with a --- line",
		`wrongname: SKILL.md names the skill "other", but its folder is "wrongname"`,
	}
	if err != nil || !slices.Equal(problems, want) {
		t.Errorf("BrokenSkills = %q, %v; want %q", problems, err, want)
	}
	// A skill folder replaced by a symlink to another place is replaced, not followed.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(skills, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.SaveSkill(context.Background(), "linked", "Linked.", "x = 1\n"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("SaveSkill wrote through a symlink: %v", entries)
	}
}

func TestParseSkillMD(t *testing.T) {
	tests := []struct {
		in, name, desc, body, errHas string
	}{
		{in: "---\nname: a\ndescription: b\n---\n# A\n", name: "a", desc: "b", body: "# A\n"},
		{in: "---\r\nname: a\r\ndescription: b\r\nlicense: MIT\r\n---\r\n\r\nBody", name: "a", desc: "b", body: "Body"},
		{in: "---\nname: a\ndescription: >\n  folded\n  text\n---", name: "a", desc: "folded text", body: ""},
		{in: "# no front matter", errHas: "no YAML front matter"},
		{in: "---\nname: a\n", errHas: "no closing"},
		{in: "---\nname: [a\n---\n", errHas: "front matter"},
		// Lines are SKILL.md's, where the front matter starts on line 2.
		{in: "---\nname: a\ndescription: b\nx: y: z\n---\n", errHas: "line 4: mapping values are not allowed"},
		{in: "---\nname: a\n---\n", errHas: "needs a name and a description"},
		{in: "---\nname: a\ndescription: b\n" + aliasBomb() + "---\n", errHas: "aliases and merge keys expand to more than"},
		{in: "---\nname: a\ndescription: b\nx: " + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + "\n---\n", errHas: "nested deeper than 1000 levels"},
	}
	for _, tc := range tests {
		fm, body, err := parseSkillMD([]byte(tc.in))
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("parseSkillMD(%q) = %v, want %q", tc.in, err, tc.errHas)
			}
			continue
		}
		if err != nil || fm.Name != tc.name || fm.Description != tc.desc || body != tc.body {
			t.Errorf("parseSkillMD(%q) = %+v, %q, %v", tc.in, fm, body, err)
		}
	}
}

// pythonEnv is the environment of a sandboxed program: PYTHONPATH lists the
// workspace before the folder holding the shared skills.
func pythonEnv(paths ...string) []string {
	return []string{"PYTHONPATH=" + strings.Join(paths, ":"), "LC_ALL=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}
}

// TestSkillsImportable runs Python as a sandbox would: a saved skill and a
// shared one are both importable as skills.<name> in one program.
func TestSkillsImportable(t *testing.T) {
	m := newManager(t, Options{SharedSkillsDir: repoSkills(t)})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.SaveSkill(context.Background(), "word_count", "Count words.", wordCount); err != nil {
		t.Fatal(err)
	}
	prog := `
from skills.word_count import run
from skills.csv_report import run as report
from skills.json_query import get
from skills.text_diff import stats
print(run("a b a")["a"], report(SALES)["rows"], get({"x": [5]}, "x[0]"), stats("a\n", "b\n")["added"])
`
	sales := filepath.Join(repoSkills(t), "csv_report", "testdata", "sales.csv")
	cmd := exec.Command(DefaultPython, "-s", "-B", "-c", strings.Replace(prog, "SALES", `"`+sales+`"`, 1))
	cmd.Env = pythonEnv(tn.WorkspaceDir(), filepath.Dir(repoSkills(t)))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2 8 5 1" {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// TestSharedSkills checks the repository's skills: each has a valid SKILL.md,
// code that passes SaveSkill's own check, and Python tests that pass.
func TestSharedSkills(t *testing.T) {
	dir := repoSkills(t)
	m := newManager(t, Options{SharedSkillsDir: dir})
	tn := mustTenant(t, m, "acme")
	list, err := tn.ListSkills()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 3 {
		t.Fatalf("want at least three shared skills, got %d", len(list))
	}
	if _, err := os.Stat(filepath.Join(dir, "__init__.py")); err == nil {
		t.Error("skills/__init__.py exists: skills must stay a namespace package")
	}
	for _, s := range list {
		t.Run(s.Name, func(t *testing.T) {
			full, err := tn.GetSkill(s.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !full.Shared || full.Code == "" || len(full.Description) > maxDescLen || !strings.Contains(full.Instructions, "from skills."+s.Name+" import") {
				t.Errorf("skill %s: shared=%v, %d bytes of code, description %d chars, instructions without a usage line",
					s.Name, full.Shared, len(full.Code), len(full.Description))
			}
			info, err := m.checkPython(context.Background(), full.Code)
			if err != nil || len(info.Functions) == 0 {
				t.Fatalf("code check: %+v, %v", info, err)
			}
			testFile := "test_" + s.Name + ".py"
			if !slices.Contains(full.Files, testFile) {
				t.Fatalf("no %s in %v", testFile, full.Files)
			}
			cmd := exec.Command(DefaultPython, "-s", "-B", "-m", "unittest", "skills."+s.Name+".test_"+s.Name)
			cmd.Env = pythonEnv(filepath.Dir(dir))
			cmd.Dir = t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("python tests of %s: %v\n%s", s.Name, err, out)
			}
		})
	}
}
