"""Where sandboxed Python finds modules, shared by the zygote and by Python
subprocesses of programs (through sitecustomize): the workspace and the
shared tree come after the standard library and site-packages, and the
servers and skills packages are fixed to their directories, so that a module
a program leaves in the workspace cannot replace theirs later."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
else:
    # The same class, from the frozen module every interpreter starts
    # with: importing importlib (and warnings with it) would cost a new
    # sandbox a few tenths of a millisecond.
    from _frozen_importlib import ModuleSpec


def extend_path(paths: list[str]) -> None:
    """Append paths to sys.path, after everything already there."""
    for p in paths:
        if p and p not in sys.path:
            sys.path.append(p)


def fix_package(name: str, dirs: list[str]) -> None:
    """Make name a package over exactly dirs, so that no file on sys.path
    (a workspace's servers/__init__.py, say) replaces it or reorders its
    portions."""
    spec = ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = dirs
    mod = type(sys)(name)
    mod.__spec__ = spec
    mod.__path__ = dirs
    mod.__package__ = name
    sys.modules[name] = mod
