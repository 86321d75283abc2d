# Arithmetic, evaluated in the sandbox with a whitelist of operators: the
# expression is data, never eval()'d.

snippet "safe_eval" {
  source = <<-PY
    import ast
    import operator

    _OPS = {
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
    }

    def _eval(node):
        if isinstance(node, ast.Expression):
            return _eval(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = _eval(node.left), _eval(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 10000:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](_eval(node.operand))
        raise ValueError("unsupported expression")

    def _fmt(x):
        if isinstance(x, float) and x.is_integer():
            return str(int(x))
        return str(round(x, 10)) if isinstance(x, float) else str(x)
  PY
}

rule "arithmetic" {
  description = "Evaluate an arithmetic expression, in symbols or words"
  # Numbers, operators and operator words only; .Arithmetic then checks the
  # expression and turns it into Python operators, so that "what is the
  # capital of France" or "sum of 1, 2" is left to other rules.
  pattern     = "(?i)^(?:(?:what is|what's|whats|how much is|compute|calculate|evaluate|work out)\\s+)?(?P<expr>(?:[-0-9.\\s()+*/%^×÷−]|\\b(?:x|plus|minus|times|multiplied|divided|over|to|the|power|of|squared|cubed|square|cube|root|percent|mod|modulo|divide|by|into|multiply|and|with|add|subtract|from|difference|between|remainder|when|is)\\b)+?)\\s*[?!=.]*\\s*$"
  examples    = ["what is 12 times 7?", "calculate (17 - 5) / 4", "what's 15% of 80", "divide 100 by 8", "12*7"]
  template    = <<-PY
    {{ template "safe_eval" . }}
    try:
        print(_fmt(_eval(ast.parse({{ .expr.Arithmetic }}, mode="eval"))))
    except ZeroDivisionError:
        print("undefined: division by zero")
  PY
}

rule "aggregate_numbers" {
  description = "Sum, average, minimum or maximum of a list of numbers"
  pattern     = "(?i)^(?:(?:what is|what's|whats|compute|calculate|find|give me)\\s+)?(?:the )?(?P<op>sum|total|average|mean|minimum|min|maximum|max|product) of (?:the numbers )?(?P<nums>-?[0-9.]+(?:\\s*(?:,|and|,\\s*and|\\s)\\s*-?[0-9.]+)*)\\s*[?.!]?$"
  examples    = ["sum of 1, 2, 3", "average of 4, 8 and 15", "maximum of 3 9 2"]
  template    = <<-PY
    {{ template "safe_eval" . }}
    import math
    import re

    nums = [float(x) for x in re.findall(r"-?[0-9]+(?:\.[0-9]+)?", {{ .nums }})]
    op = {{ .op }}.lower()
    if op in ("sum", "total"):
        result = sum(nums)
    elif op in ("average", "mean"):
        result = sum(nums) / len(nums)
    elif op in ("minimum", "min"):
        result = min(nums)
    elif op in ("maximum", "max"):
        result = max(nums)
    else:
        result = math.prod(nums)
    print(_fmt(result))
  PY
}
