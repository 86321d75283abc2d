"""Telling a program the kernel killed at the sandbox's memory limit from
one killed by any other SIGKILL. The backend names a file whose oom_kill
line counts the kernel's kills at the limit (the sandbox's memory cgroup's
v2 memory.events or v1 memory.oom_control, a microVM's /proc/vmstat); a
SIGKILL while that count rose was one."""

from __future__ import annotations

import os


class MemoryKills:
    def __init__(self, paths: str, limit: int) -> None:
        # Several paths, ':'-separated, when the backend cannot know which
        # the sandbox has (a pod on a cgroup v1 or v2 node): the first that
        # exists.
        self.path = next((p for p in paths.split(":") if p and os.path.exists(p)), "")
        self.limit = limit
        self.seen = self.count()

    def count(self) -> int | None:
        """The kernel's count, or None when it says none (no file, a
        kernel before Linux 4.13)."""
        if not self.path:
            return None
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        for line in data.splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def rose(self) -> bool:
        """Whether the kernel killed at the limit since catch_up."""
        now = self.count()
        return now is not None and self.seen is not None and now > self.seen

    def catch_up(self) -> None:
        """Take the kills so far as seen (after each execution)."""
        self.seen = self.count()

    def message(self) -> str:
        limit = f" of {self.limit / (1 << 20):.1f} MiB" if self.limit > 0 else ""
        return f"the program ran out of memory: the kernel killed it on reaching the sandbox's memory limit{limit}"
