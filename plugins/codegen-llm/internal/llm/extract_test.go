package llm

import (
	"strings"
	"testing"
)

func TestExtractCode(t *testing.T) {
	const prog = "import json\nprint(json.dumps({'a': 1}))\n"
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"python fence with prose around", "Sure! Here it is:\n\n```python\n" + prog + "```\n\nThis prints a JSON object.", prog},
		{"py fence", "```py\n" + prog + "```", prog},
		{"python3 fence, info string after the language", "```python3 title=main.py\n" + prog + "```", prog},
		{"plain fence", "```\n" + prog + "```", prog},
		{"tilde fence", "~~~python\n" + prog + "~~~", prog},
		{"longest python block wins over a usage snippet",
			"```python\n" + prog + "```\nRun it, or call it like:\n```python\nmain()\n```", prog},
		{"python block preferred over a longer untagged one",
			"```\n$ python3 main.py\n{\"a\": 1}\nand some more output lines\n```\n```python\n" + prog + "```", prog},
		{"equal length: the last block is the final answer",
			"```python\nprint(1)\n```\nActually:\n```python\nprint(2)\n```", "print(2)\n"},
		{"shell block is not code", "```bash\npip install requests\n```", ""},
		{"json block is not code", "```json\n{\"a\": 1}\n```", ""},
		{"unterminated fence (token limit) runs to the end", "```python\n" + prog, prog},
		{"fence indented by two spaces", "  ```python\n" + prog + "  ```", prog},
		{"inner backticks inside a longer fence", "````python\ns = \"```\"\nprint(s)\n````", "s = \"```\"\nprint(s)\n"},
		{"think block is dropped", "<think>\n```python\nprint('draft')\n```\n</think>\n```python\n" + prog + "```", prog},
		{"unterminated think block means no answer", "<think>let me consider\n```python\nprint('draft')\n```", ""},
		{"unfenced code", prog, prog},
		{"unfenced code with prose before and after",
			"Here is the program:\n" + prog + "\nThis prints the result.\n- It uses json.", prog},
		{"unfenced code keeps indented lines and comments",
			"# count lines\nfor line in open('a.txt'):\n    print(line)\n", "# count lines\nfor line in open('a.txt'):\n    print(line)\n"},
		{"unfenced tuple assignment starts code", "a, b = 1, 2\nprint(a + b)", "a, b = 1, 2\nprint(a + b)\n"},
		{"prose only", "I cannot do that without the database tool.", ""},
		{"empty", "", ""},
		{"CRLF line ends", "```python\r\nprint(1)\r\n```\r\n", "print(1)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := extractCode(tc.reply); got != tc.want {
				t.Errorf("extractCode(%q)\n got %q\nwant %q", tc.reply, got, tc.want)
			}
		})
	}
}

func TestCheckCompiles(t *testing.T) {
	python := testPython(t)
	for _, tc := range []struct {
		name, code, wantErr string
	}{
		{"valid", "print('hi')\n", ""},
		{"unicode", "print('héllo, 世界')\n", ""},
		{"unclosed paren", "print(1\n", "was never closed"},
		{"bad indent", "if True:\nprint(1)\n", "IndentationError"},
		{"return outside function (compile, not ast.parse, sees it)", "return 1\n", "'return' outside function"},
		{"await outside async function", "await x\n", "outside"},
		{"null byte", "print(1)\x00\n", "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCompiles(t.Context(), python, tc.code)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("valid code rejected: %v", err)
				}
				return
			}
			se, ok := err.(*syntaxError)
			if !ok {
				t.Fatalf("err = %T %v, want a syntax error", err, err)
			}
			if !strings.Contains(se.msg, tc.wantErr) {
				t.Errorf("error %q lacks %q", se.msg, tc.wantErr)
			}
		})
	}
	if err := checkCompiles(t.Context(), "/nonexistent/python3", "print(1)\n"); err == nil {
		t.Error("a missing interpreter passed the check")
	} else if _, ok := err.(*syntaxError); ok {
		t.Error("a missing interpreter was reported as a syntax error")
	}
}
