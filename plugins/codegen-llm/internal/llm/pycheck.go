package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// compileScript compiles the program read from stdin without running it.
// compile() rather than ast.parse(): it also rejects what only the
// compiler sees ('return' outside function, misplaced nonlocal, 'await'
// outside async function). Exit 3 with the formatted SyntaxError on
// stderr means the code does not compile.
const compileScript = `import sys, traceback
src = sys.stdin.buffer.read().decode("utf-8", "replace")
try:
    compile(src, "<generated>", "exec", dont_inherit=True)
except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
    sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    sys.exit(3)
`

// checkTimeout bounds one compile check; compiling even a large program
// takes milliseconds, so hitting it means the interpreter is stuck.
const checkTimeout = 15 * time.Second

// syntaxError is code that does not compile; its message is Python's.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// checkCompiles runs python (a resolved real path) in isolated mode on
// code. It returns a *syntaxError when the code does not compile and
// another error when the check itself could not run.
func checkCompiles(ctx context.Context, python, code string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", compileScript)
	// An explicit, empty-but-for-locale environment: the plugin's own
	// environment may hold provider keys.
	cmd.Env = []string{"LANG=C.UTF-8"}
	cmd.Stdin = strings.NewReader(code)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 && ctx.Err() == nil && stderr.Len() > 0 {
		return &syntaxError{msg: strings.TrimSpace(stderr.String())}
	}
	return fmt.Errorf("check generated code with %s: %w: %s", python, err, strings.TrimSpace(stderr.String()))
}
