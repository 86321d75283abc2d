package stubgen

import (
	"slices"
	"testing"
)

func TestIdentifier(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"read_text_file", "read_text_file"},
		{"get-bilibili-rank", "get_bilibili_rank"},
		{"a.b c", "a_b_c"},
		{"12306-mcp", "_12306_mcp"},
		{"2fa", "_2fa"},
		{"naïve café", "naive_cafe"},
		{"ｆｕｌｌ", "full"},
		{"名前", "arg"},
		{"get名前", "get__"},
		{"", "arg"},
		{"---", "arg"},
		{"class", "class"}, // keywords are the namer's business
	}
	for _, tt := range tests {
		if got := identifier(tt.in, "arg"); got != tt.want {
			t.Errorf("identifier(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCamel(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"read_text_file", "ReadTextFile"},
		{"entityType", "EntityType"},
		{"x-y.z", "XYZ"},
		{"2fa", "2fa"},
		{"名前", ""},
	}
	for _, tt := range tests {
		if got := camel(tt.in); got != tt.want {
			t.Errorf("camel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIsIdentifier(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"ok", true}, {"_x1", true}, {"match", true}, {"type", true}, {"_", true},
		{"", false}, {"1x", false}, {"a-b", false}, {"None", false}, {"lambda", false},
		{"名前", false}, {"a b", false},
	}
	for _, tt := range tests {
		if got := IsIdentifier(tt.in); got != tt.want {
			t.Errorf("IsIdentifier(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestAssignNames covers the naming of tools (module level: case-insensitive, no builtins)
// and of parameters (local: exact, only the names the body uses are taken).
func TestAssignNames(t *testing.T) {
	tools := func() *namer { return newNamer(true, pyBuiltins, moduleNames) }
	params := func() *namer { return newNamer(false, bodyNames, setOf("Node")) }
	tests := []struct {
		name  string
		namer func() *namer
		in    []string
		want  []string
	}{
		{"valid names stay", tools, []string{"read_file", "write_file"}, []string{"read_file", "write_file"}},
		{"exact names win over sanitized ones", tools, []string{"get-data", "get_data"}, []string{"get_data_2", "get_data"}},
		{"keywords get an underscore", tools, []string{"import", "class", "None"}, []string{"import_", "class_", "None_"}},
		{"builtins are not shadowed", tools, []string{"open", "list", "print"}, []string{"open_", "list_", "print_"}},
		{"typing and runtime names are not shadowed", tools, []string{"Any", "call_tool", "cast"}, []string{"Any_", "call_tool_", "cast_"}},
		{"case-insensitive collisions", tools, []string{"Search", "search", "SEARCH"}, []string{"Search", "search_2", "SEARCH_3"}},
		{"builtins compare exactly", tools, []string{"List", "list"}, []string{"List", "list_"}},
		{"dunders", tools, []string{"__init__", "__x", "__all__", "_all__"}, []string{"_init__", "__x", "_all___2", "_all__"}},
		{"duplicates", tools, []string{"a", "a", "a"}, []string{"a", "a_2", "a_3"}},
		{"suffix collides with an original", tools, []string{"a-1", "a_1", "a"}, []string{"a_1_2", "a_1", "a"}},
		{"fallback", tools, []string{"名前", "名字"}, []string{"tool", "tool_2"}},
		{"leading digits", tools, []string{"2fa", "_2fa"}, []string{"_2fa_2", "_2fa"}},
		{"params may shadow builtins", params, []string{"type", "id", "filter", "format"}, []string{"type", "id", "filter", "format"}},
		{"params avoid body names", params, []string{"call_tool", "_arguments", "dict", "str", "Any", "cast", "Node"}, []string{"call_tool_", "_arguments_", "dict_", "str_", "Any_", "cast_", "Node_"}},
		{"params are case-sensitive", params, []string{"Path", "path"}, []string{"Path", "path"}},
		{"param keywords", params, []string{"from", "from_"}, []string{"from__2", "from_"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assignNames(tt.namer(), tt.in, "tool")
			if !slices.Equal(got, tt.want) {
				t.Errorf("assignNames(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, n := range got {
				if !IsIdentifier(n) {
					t.Errorf("%q is not an identifier", n)
				}
			}
		})
	}
}

func TestGenerateNames(t *testing.T) {
	pkgs := Generate([]Server{
		{Name: "my-server", Tools: []Tool{{Name: "b"}, {Name: "a"}}},
		{Name: "my_server"},
		{Name: "12306-mcp"},
		{Name: "My_Server"},
	})
	var got []string
	for _, p := range pkgs {
		got = append(got, p.Name)
	}
	// Sorted by name, the exact "My_Server" claims the folded name first.
	if want := []string{"my_server_2", "my_server_3", "_12306_mcp", "My_Server"}; !slices.Equal(got, want) {
		t.Errorf("package names %q, want %q", got, want)
	}
	st := pkgs[0].Stubs
	if st[0].Tool != "b" || st[0].Module != "servers.my_server_2.b" || st[0].Path != "servers/my_server_2/b.py" {
		t.Errorf("stub 0 = %+v, want tool b in input order", st[0])
	}
	if imp := st[1].Import(); imp != "from servers.my_server_2 import a" {
		t.Errorf("Import() = %q", imp)
	}
}
