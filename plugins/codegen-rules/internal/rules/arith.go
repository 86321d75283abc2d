package rules

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Arithmetic renders the value, an arithmetic question in words or symbols
// ("12 times 7", "divide 100 by 8", "15% of 80", "2^10"), as a Python str
// literal holding the expression in Python's operators, or fails the match
// when it is not one well-formed expression: a rule must not answer what it
// did not understand. The program still evaluates the expression as data.
func (v Value) Arithmetic() (string, error) {
	expr, err := arithmetic(string(v))
	if err != nil {
		return "", err
	}
	return Value(expr).String(), nil
}

const arithNum = `(\d+(?:\.\d+)?|\.\d+)`

// arithVerbs are whole-question forms, rewritten before the operator words.
var arithVerbs = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`^divide ` + arithNum + ` (?:by|into) ` + arithNum + `$`), "$1 / $2"},
	{regexp.MustCompile(`^multiply ` + arithNum + ` (?:by|and|with) ` + arithNum + `$`), "$1 * $2"},
	{regexp.MustCompile(`^add ` + arithNum + ` (?:and|to|plus) ` + arithNum + `$`), "$1 + $2"},
	{regexp.MustCompile(`^subtract ` + arithNum + ` from ` + arithNum + `$`), "$2 - $1"},
	{regexp.MustCompile(`^(?:the )?difference between ` + arithNum + ` and ` + arithNum + `$`), "$1 - $2"},
	{regexp.MustCompile(`^(?:the )?remainder (?:of|when) ` + arithNum + ` (?:is )?divided by ` + arithNum + `$`), "$1 % $2"},
	{regexp.MustCompile(`^(?:the )?square root of ` + arithNum + `$`), "$1 ** 0.5"},
	{regexp.MustCompile(`^(?:the )?(square|cube) of ` + arithNum + `$`), "$2 $1"},
}

// arithWords maps operator words to Python operators, longest first.
var arithWords = strings.NewReplacer(
	"to the power of", " ** ", "multiplied by", " * ", "divided by", " / ",
	"percent of", " / 100 * ", "% of", " / 100 * ",
	"squared", " ** 2 ", "cubed", " ** 3 ", "square", " ** 2 ", "cube", " ** 3 ",
	"plus", " + ", "minus", " - ", "times", " * ", "over", " / ", "modulo", " % ", "mod", " % ",
	"×", " * ", "÷", " / ", "−", " - ", "^", " ** ", "x", " * ",
)

var arithToken = regexp.MustCompile(`\s*(\*\*|\d+(?:\.\d+)?|\.\d+|[-+*/%()])`)

// arithmetic turns a question into a Python expression of numbers,
// + - * / % ** and parentheses, checked by a small parser.
func arithmetic(q string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(q))
	s = strings.Join(strings.Fields(s), " ")
	for _, v := range arithVerbs {
		if v.re.MatchString(s) {
			s = v.re.ReplaceAllString(s, v.repl)
			break
		}
	}
	s = arithWords.Replace(s)
	var toks []string
	for rest := strings.TrimSpace(s); rest != ""; rest = strings.TrimSpace(rest) {
		m := arithToken.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return "", fmt.Errorf("%q is not arithmetic: %w", q, ErrNoMatch)
		}
		toks = append(toks, rest[m[2]:m[3]])
		rest = rest[m[1]:]
	}
	p := arithParser{toks: toks}
	if err := p.expr(); err != nil || p.i != len(toks) {
		return "", fmt.Errorf("%q is not one arithmetic expression: %w", q, ErrNoMatch)
	}
	if p.ops == 0 {
		return "", fmt.Errorf("%q has no operation: %w", q, ErrNoMatch)
	}
	return strings.Join(toks, " "), nil
}

// arithParser checks the grammar the sandbox's evaluator accepts:
// expr = term {(+|-) term}; term = factor {(*|/|%) factor};
// factor = unary [** factor]; unary = (+|-) unary | number | ( expr ).
type arithParser struct {
	toks []string
	i    int
	ops  int
}

var errArith = errors.New("not an arithmetic expression")

func (p *arithParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *arithParser) expr() error {
	if err := p.term(); err != nil {
		return err
	}
	for p.peek() == "+" || p.peek() == "-" {
		p.i++
		p.ops++
		if err := p.term(); err != nil {
			return err
		}
	}
	return nil
}

func (p *arithParser) term() error {
	if err := p.factor(); err != nil {
		return err
	}
	for t := p.peek(); t == "*" || t == "/" || t == "%"; t = p.peek() {
		p.i++
		p.ops++
		if err := p.factor(); err != nil {
			return err
		}
	}
	return nil
}

func (p *arithParser) factor() error {
	if err := p.unary(); err != nil {
		return err
	}
	if p.peek() == "**" {
		p.i++
		p.ops++
		return p.factor()
	}
	return nil
}

func (p *arithParser) unary() error {
	switch t := p.peek(); {
	case t == "+" || t == "-":
		p.i++
		return p.unary()
	case t == "(":
		p.i++
		if err := p.expr(); err != nil {
			return err
		}
		if p.peek() != ")" {
			return errArith
		}
		p.i++
		return nil
	case t != "" && (t[0] >= '0' && t[0] <= '9' || t[0] == '.'):
		p.i++
		return nil
	}
	return errArith
}
