# Reads the local tool packages under a servers directory with Python's own
# ast module (nothing is imported or executed) and prints one JSON document:
#   {"packages": [{"name", "doc", "functions": [{"name", "module", "file",
#     "line", "signature", "doc", "source"}]}], "errors": [{"file", "error"}]}
# cexecd appends the call main(DIR, MARKER) and runs the program in a
# sandbox of the configured backend that shows DIR read-only.
# A package is a directory with an __init__.py that does not start with
# MARKER (generated stubs); its tools are the public top-level functions of
# its public modules (__init__.py included), limited by __all__ if a module
# defines one.
import ast
import json
import os
import sys

MAX_FILE = 1 << 20
MAX_SOURCE = 16 << 10


def read(path):
    with open(path, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError("file larger than %d bytes" % MAX_FILE)
    return data.decode("utf-8")


def exported(tree):
    """The names in a literal __all__, or None when there is none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return None


def param(arg, default):
    s = arg.arg
    if arg.annotation is not None:
        s += ": " + ast.unparse(arg.annotation)
    if default is not None:
        s += (" = " if arg.annotation is not None else "=") + ast.unparse(default)
    return s


def parameters(a):
    """The parameter list as PEP 8 writes it (ast.unparse omits the spaces
    around the = of annotated defaults)."""
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + a.defaults
    parts = []
    for i, (arg, default) in enumerate(zip(pos, defaults)):
        parts.append(param(arg, default))
        if i == len(a.posonlyargs) - 1:
            parts.append("/")
    if a.vararg is not None:
        parts.append("*" + param(a.vararg, None))
    elif a.kwonlyargs:
        parts.append("*")
    parts += [param(arg, default) for arg, default in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg is not None:
        parts.append("**" + param(a.kwarg, None))
    return ", ".join(parts)


def signature(fn):
    sig = "%s(%s)" % (fn.name, parameters(fn.args))
    if fn.returns is not None:
        sig += " -> " + ast.unparse(fn.returns)
    if isinstance(fn, ast.AsyncFunctionDef):
        sig = "async " + sig
    return sig


def source(src, lines, fn):
    start = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
    text = "\n".join(lines[start - 1 : fn.end_lineno])
    if len(text) > MAX_SOURCE:
        text = text[:MAX_SOURCE] + "\n# ... (truncated)"
    return text


def scan_module(pkg, mod_name, rel, path, out, errors):
    try:
        src = read(path)
        tree = ast.parse(src, filename=rel)
    except (OSError, ValueError, SyntaxError) as e:
        errors.append({"file": rel, "error": "%s: %s" % (type(e).__name__, e)})
        return None
    lines = src.splitlines()
    allowed = exported(tree)
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("_") or (allowed is not None and node.name not in allowed):
            continue
        out.append({
            "name": node.name,
            "module": mod_name,
            "file": rel,
            "line": node.lineno,
            "signature": signature(node),
            "doc": ast.get_docstring(node) or "",
            "source": source(src, lines, node),
        })
    return tree


def main(root, marker):
    packages, errors = [], []
    for name in sorted(os.listdir(root)):
        pkg_dir = os.path.join(root, name)
        init = os.path.join(pkg_dir, "__init__.py")
        if not name.isidentifier() or not os.path.isfile(init):
            continue
        try:
            with open(init, "rb") as f:
                first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        except OSError as e:
            errors.append({"file": name + "/__init__.py", "error": str(e)})
            continue
        if first == marker:
            continue
        functions = []
        tree = scan_module(name, "servers." + name, name + "/__init__.py", init, functions, errors)
        doc = ast.get_docstring(tree) if tree is not None else None
        for entry in sorted(os.listdir(pkg_dir)):
            mod, ext = os.path.splitext(entry)
            path = os.path.join(pkg_dir, entry)
            if ext != ".py" or mod.startswith("_") or not mod.isidentifier() or not os.path.isfile(path):
                continue
            scan_module(name, "servers.%s.%s" % (name, mod), name + "/" + entry, path, functions, errors)
        packages.append({"name": name, "doc": doc or "", "functions": functions})
    json.dump({"packages": packages, "errors": errors}, sys.stdout)

