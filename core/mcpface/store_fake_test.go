package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// memState keeps state values per tenant in memory.
type memState struct {
	mu sync.Mutex
	m  map[string]map[string]json.RawMessage
}

func (s *memState) ListState(_ context.Context, sc Scope) ([]StateFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StateFile
	for name, v := range s.m[sc.Tenant] {
		out = append(out, StateFile{Name: name, Size: int64(len(v)), Modified: time.Unix(1700000000, 0)})
	}
	slices.SortFunc(out, func(a, b StateFile) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memState) GetState(_ context.Context, sc Scope, name string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[sc.Tenant][name]
	if !ok {
		return nil, fmt.Errorf("state %s: %w", name, pluginapi.ErrNotFound)
	}
	return v, nil
}

func (s *memState) SaveState(_ context.Context, sc Scope, name string, value json.RawMessage) error {
	if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") {
		return fmt.Errorf("state %q: the name must end in .json, .yaml or .yml: %w", name, pluginapi.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]json.RawMessage{}
	}
	if s.m[sc.Tenant] == nil {
		s.m[sc.Tenant] = map[string]json.RawMessage{}
	}
	s.m[sc.Tenant][name] = value
	return nil
}

// memSkills keeps skills per tenant in memory and checks that their code
// compiles with the real interpreter.
type memSkills struct {
	mu sync.Mutex
	m  map[string]map[string]Skill
	// shared are the operator's, for every tenant; a tenant's own skill
	// of the same name hides one.
	shared []Skill
	// broken are skills whose files GetSkill cannot read, with the error.
	broken map[string]error
}

var skillNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func (s *memSkills) ListSkills(_ context.Context, sc Scope) ([]Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Skill
	for _, k := range s.m[sc.Tenant] {
		k.Code, k.Instructions = "", ""
		out = append(out, k)
	}
	for _, k := range s.shared {
		if _, hidden := s.m[sc.Tenant][k.Name]; !hidden {
			k.Code, k.Instructions = "", ""
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memSkills) BrokenSkills(context.Context, Scope) ([]Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Skill
	for name, err := range s.broken {
		out = append(out, Skill{Name: name, Problem: err.Error()})
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memSkills) GetSkill(_ context.Context, sc Scope, name string) (Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.broken[name]; err != nil {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	if k, ok := s.m[sc.Tenant][name]; ok {
		return k, nil
	}
	for _, k := range s.shared {
		if k.Name == name {
			return k, nil
		}
	}
	return Skill{}, fmt.Errorf("skill %s: %w", name, pluginapi.ErrNotFound)
}

func (s *memSkills) SaveSkill(ctx context.Context, sc Scope, name, description, code string) (Skill, error) {
	if !skillNameRE.MatchString(name) {
		return Skill{}, fmt.Errorf("invalid skill name %q: use a lowercase snake_case Python identifier: %w", name, pluginapi.ErrInvalidArgument)
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-c", "import sys; compile(sys.stdin.read(), 'skill', 'exec')")
	cmd.Stdin = strings.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return Skill{}, fmt.Errorf("the code does not compile: %s: %w", lines[len(lines)-1], pluginapi.ErrInvalidArgument)
	}
	k := Skill{Name: name, Description: description, Import: "skills." + name, Instructions: description, Code: code}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]Skill{}
	}
	if s.m[sc.Tenant] == nil {
		s.m[sc.Tenant] = map[string]Skill{}
	}
	s.m[sc.Tenant][name] = k
	return k, nil
}

// emailTokenizer replaces e-mail addresses with [EMAIL_n], numbered per
// (tenant, session), like the real vault does for every PII type.
type emailTokenizer struct {
	mu     sync.Mutex
	tokens map[Scope]map[string]string
	fail   bool
}

var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)

func (z *emailTokenizer) Tokenize(_ context.Context, sc Scope, text string) (string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.fail {
		return "", fmt.Errorf("detector unavailable: %w", pluginapi.ErrUnavailable)
	}
	if z.tokens == nil {
		z.tokens = map[Scope]map[string]string{}
	}
	m := z.tokens[sc]
	if m == nil {
		m = map[string]string{}
		z.tokens[sc] = m
	}
	return emailRE.ReplaceAllStringFunc(text, func(v string) string {
		tok, ok := m[strings.ToLower(v)]
		if !ok {
			tok = fmt.Sprintf("[EMAIL_%d]", len(m)+1)
			m[strings.ToLower(v)] = tok
		}
		return tok
	}), nil
}

func (z *emailTokenizer) TokenizeJSON(ctx context.Context, sc Scope, raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var walk func(any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			return z.Tokenize(ctx, sc, x)
		case []any:
			for i := range x {
				y, err := walk(x[i])
				if err != nil {
					return nil, err
				}
				x[i] = y
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				kk, err := z.Tokenize(ctx, sc, k)
				if err != nil {
					return nil, err
				}
				if out[kk], err = walk(e); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		return v, nil
	}
	v, err := walk(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
