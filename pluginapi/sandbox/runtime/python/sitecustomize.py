"""Python subprocesses of sandboxed programs get the zygote's module path.

PYTHONPATH names only the runtime's directory and PYTHONSAFEPATH keeps the
working directory (the workspace) off the front of sys.path, so the
workspace's entries come from CEXEC_PATH, after the standard library, and
CEXEC_PACKAGES ("name=dir:dir;name=dir") fixes servers and skills."""

import os

from _cexec_paths import extend_path, fix_package

extend_path(os.environ.get("CEXEC_PATH", "").split(":"))
for _item in os.environ.get("CEXEC_PACKAGES", "").split(";"):
    _name, _, _dirs = _item.partition("=")
    if _name:
        fix_package(_name, _dirs.split(":"))
