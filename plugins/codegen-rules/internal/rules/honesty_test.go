package rules

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/codegen"
)

// TestAnswersOrRefuses puts arithmetic, file, memory and unanswerable
// phrasings to the generator with every tool available: each is answered
// exactly (arithmetic programs run here for real), handled by the rule that
// uses the right tool, or refused with what the rules can do. None may get
// a program that answers something else.
func TestAnswersOrRefuses(t *testing.T) {
	c := client(t, `{}`)
	all := tools("filesystem/list_directory", "filesystem/read_text_file", "filesystem/search_files",
		"filesystem/write_file", "filesystem/create_directory", "filesystem/list_allowed_directories",
		"memory/create_entities", "memory/add_observations", "memory/open_nodes", "memory/search_nodes",
		"memory/read_graph", "memory/delete_entities", "textutils/word_count", "textutils/csv_summary")
	const refuse = "refuse"
	for _, tc := range []struct {
		task string
		// want is the program's output for arithmetic, "use:<import>" for a
		// rule that calls a tool, or refuse.
		want string
	}{
		{"what is 12 times 7?", "84"},
		{"12*7", "84"},
		{"what's 15% of 80", "12"},
		{"20 percent of 150", "30"},
		{"divide 100 by 8", "12.5"},
		{"what is 100 divided by 8?", "12.5"},
		{"sum of 3, 4 and 5", "12"},
		{"what is the sum of 3, 4 and 5?", "12"},
		{"average of 4, 8 and 15", "9"},
		{"calculate 2 to the power of 10", "1024"},
		{"what is 9 squared", "81"},
		{"square root of 16", "4"},
		{"what is 7 minus 10", "-3"},
		{"how much is 3 plus 4 times 2", "11"},
		{"multiply 6 by 7", "42"},
		{"subtract 3 from 10", "7"},
		{"what is 17 mod 5", "2"},
		{"what is 0.1 + 0.2", "0.3"},
		{"(2+3)*4", "20"},
		{"what is 3 x 4", "12"},
		{"what is 2 ^ 3", "8"},
		{"what is -5 + 2?", "-3"},
		{"what is 1/0", "undefined: division by zero"},
		{"count the words in notes/todo.txt", "use:from servers.textutils import word_count"},
		{"how many words are in report.md?", "use:from servers.textutils import word_count"},
		{"most common words in notes/todo.txt", "use:from servers.textutils import word_count"},
		{"summarize data/sales.csv", "use:from servers.textutils import csv_summary"},
		{"what is in data/sales.csv?", "use:from servers.textutils import csv_summary"},
		{"list files in notes", "use:from servers.filesystem import list_directory"},
		{"how many lines are in notes/todo.txt?", "use:from servers.filesystem import read_text_file"},
		{"remember that Alice works at Acme", "use:from servers.memory import add_observations, create_entities, open_nodes"},
		{"what do you know about Alice?", "use:from servers.memory import open_nodes, search_nodes"},
		{"what do you remember?", "use:from servers.memory import read_graph"},
		{"forget Alice", "use:from servers.memory import delete_entities"},
		{"what is the capital of France?", refuse},
		{"who is Alice?", refuse},
		{"what is love", refuse},
		{"what is 12 apples plus 3 pears?", refuse},
		{"what is 5 +", refuse},
		{"what is 2024?", refuse},
		{"how many people live in Paris?", refuse},
		{"what is the weather in Paris", refuse},
		{"translate hello into French", refuse},
		{"tell me a joke", refuse},
		{"send an email to bob@example.com", refuse},
	} {
		t.Run(tc.task, func(t *testing.T) {
			resp, err := c.Generate(context.Background(), codegen.GenerateRequest{Task: tc.task, Tools: all, Language: "python"})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == refuse:
				if resp.Code != "" {
					t.Fatalf("answered with %s:\n%s", resp.Model, resp.Code)
				}
				if d := fmtDiags(resp.Diagnostics); !strings.Contains(d, "the rules generator answers only tasks in these forms: ") ||
					!strings.Contains(d, `"llm" codegen plugin`) {
					t.Fatalf("refusal does not say what the rules can do: %s", d)
				}
			case strings.HasPrefix(tc.want, "use:"):
				if !strings.Contains(resp.Code, strings.TrimPrefix(tc.want, "use:")+"\n") {
					t.Fatalf("%s wrote a program without %q:\n%s", resp.Model, tc.want, resp.Code)
				}
			default:
				if resp.Code == "" {
					t.Fatalf("no program: %s", fmtDiags(resp.Diagnostics))
				}
				out, err := exec.Command("/usr/bin/python3", "-I", "-c", resp.Code).CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s\n%s", err, resp.Code, out)
				}
				if got := strings.TrimSpace(string(out)); got != tc.want {
					t.Fatalf("%s answered %q, want %q", resp.Model, got, tc.want)
				}
			}
		})
	}
}

// TestArithmeticRefusesWhatItDoesNotParse checks the normaliser alone.
func TestArithmeticRefusesWhatItDoesNotParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"12 times 7", "12 * 7"},
		{"divide 100 by 8", "100 / 8"},
		{"15% of 80", "15 / 100 * 80"},
		{"2^10", "2 ** 10"},
		{"subtract 3 from 10", "10 - 3"},
		{"(1 + 2", ""},
		{"7", ""},
		{"5 5", ""},
		{"import os", ""},
		{"__import__('os')", ""},
	} {
		got, err := arithmetic(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("arithmetic(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
