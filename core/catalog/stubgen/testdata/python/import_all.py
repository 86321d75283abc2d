"""Imports every generated stub package and tool the way agent code does, and resolves every
annotation (typing.get_type_hints evaluates the quoted forward references too).

Usage: import_all.py ROOT  (ROOT/servers is the stub tree; the cexec stand-in is importable).
Prints the number of tools checked; raises on the first failure."""
import importlib
import pathlib
import sys
import typing

root = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(root))
tools = 0
for pkg_dir in sorted((root / "servers").iterdir()):
    pkg = importlib.import_module("servers." + pkg_dir.name)
    for name in pkg.__all__:
        fn = getattr(pkg, name)
        if not callable(fn) or fn.__name__ != name:
            raise AssertionError(f"servers.{pkg_dir.name}.{name} is {fn!r}, want its function")
        if getattr(pkg, name) is not fn:
            raise AssertionError(f"servers.{pkg_dir.name}.{name} changed on second access")
        typing.get_type_hints(fn)
        module = sys.modules[f"servers.{pkg_dir.name}.{name}"]
        for obj in vars(module).values():
            if typing.is_typeddict(obj):
                typing.get_type_hints(obj)
        tools += 1
print(tools)
