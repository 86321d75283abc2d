"""The zygote's state and the methods its parts call across modules.

The Zygote is assembled from parts, one module per concern: warm-up
(_warmup), relaying an execution (_relay), cleaning up after it (_sweep),
the forked program (_child) and persistent interpreters (_workers). Each
part derives from Part, which declares for the type checker what the
others provide; at run time it is empty, and Zygote's method resolution
finds every method in the part that defines it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import select
    from typing import Any

    from cexec import _proto
    from cexec._relay import Run
    from cexec._forker import ForkServer, Usage
    from cexec._warmup import Spare
    from cexec._workers import Worker
    from cexec._zygote import Options


class Part:
    if TYPE_CHECKING:
        opts: Options
        ctl_in: int
        ctl_out: int
        reader: _proto.Reader
        inbox: list[dict[str, Any]]
        is_init: bool
        workers: dict[str, Worker]
        hardened: bool
        frozen: bool
        spare: Spare | None
        rehearsed: bool
        forker: ForkServer | None
        forker_failed: bool
        forks: bool
        exits: dict[int, tuple[int, Usage]]
        last_end: float
        ready_at: float
        preload: list[str]
        executions: int
        wake_r: int
        wake_w: int

        def send(self, msg: dict[str, Any]) -> None:
            raise NotImplementedError

        def write(self, frame: bytes) -> None:
            raise NotImplementedError

        def read_host(self) -> bool:
            raise NotImplementedError

        def shutdown(self) -> None:
            raise NotImplementedError

        def report(self, run: Run) -> None:
            raise NotImplementedError

        def idle_wait(self) -> int | None:
            raise NotImplementedError

        def idle_step(self) -> None:
            raise NotImplementedError

        def freeze(self) -> None:
            raise NotImplementedError

        def harden(self) -> None:
            raise NotImplementedError

        def prefork(self) -> None:
            raise NotImplementedError

        def rehearse(self, spare: int) -> None:
            raise NotImplementedError

        def drop_spare(self) -> None:
            raise NotImplementedError

        def take_spare(self, run: Run, job: dict[str, Any]) -> bool:
            raise NotImplementedError

        def pump(self, run: Run) -> None:
            raise NotImplementedError

        def finished(self, run: Run) -> bool:
            raise NotImplementedError

        def ended_cleanly(self, run: Run) -> bool:
            raise NotImplementedError

        def close_fds(self, run: Run) -> None:
            raise NotImplementedError

        def check_exit(self, run: Run) -> None:
            raise NotImplementedError

        def relay_output(self, run: Run, fd: int, stdout: bool) -> bool:
            raise NotImplementedError

        def send_output(self, run: Run, data: bytes, stdout: bool) -> None:
            raise NotImplementedError

        def flush_output(self, run: Run, then: bytes=b'') -> None:
            raise NotImplementedError

        def relay_channel(self, run: Run, poller: select.poll) -> bool:
            raise NotImplementedError

        def handle_host_during(self, run: Run, poller: select.poll) -> None:
            raise NotImplementedError

        def drain(self, run: Run, until_eof: bool) -> None:
            raise NotImplementedError

        def keep(self) -> set[int]:
            raise NotImplementedError

        def kill(self, run: Run) -> None:
            raise NotImplementedError

        def clean_up(self, run: Run) -> None:
            raise NotImplementedError

        def none_started(self, run: Run) -> bool:
            raise NotImplementedError

        def collect(self, run: Run) -> None:
            raise NotImplementedError

        def sweep(self, keep: set[int]) -> bool:
            raise NotImplementedError

        def reap(self) -> None:
            raise NotImplementedError

        def start_child(self, run: Run, job: dict[str, Any]) -> None:
            raise NotImplementedError

        def enter_child(self, out_w: int, err_w: int, chan: int) -> None:
            raise NotImplementedError

        def start_persistent(self, run: Run, job: dict[str, Any]) -> None:
            raise NotImplementedError

        def spawn_worker(self, session: str) -> Worker:
            raise NotImplementedError

        def kill_worker(self, worker: Worker) -> None:
            raise NotImplementedError

        def retire_worker(self, run: Run) -> None:
            raise NotImplementedError

        def start_forker(self) -> None:
            raise NotImplementedError

        def drop_forker(self, reaped: bool = False) -> None:
            raise NotImplementedError

        def fork_spare_via_server(self, out_w: int, err_w: int, child_chan: int) -> int:
            raise NotImplementedError

        def read_forker(self) -> None:
            raise NotImplementedError

        def forked_exit(self, run: Run, wait: float = 0) -> bool:
            raise NotImplementedError
