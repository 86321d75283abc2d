"""Persistent interpreters: forked workers that keep a session's globals
between executions, and the zygote's bookkeeping of them."""

from __future__ import annotations

import os
import resource
import struct
import sys
import time

import cexec
from cexec import _proto
from cexec._child import _flush_std, _new_main, _run_program, _wind_up
from cexec._fresh import Baseline
from cexec._osutil import _close, _fork_connected, _kill_reap, _send_with_fds, _socketpair
from cexec._parts import Part

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import socket
    from typing import Any
else:
    # The C module behind socket: the Python wrapper builds enums that
    # cost an idle sandbox about a megabyte.
    import _socket as socket
if TYPE_CHECKING:
    from cexec._relay import Run

_MAX_WORKERS = 4


class Worker:
    """A persistent interpreter serving one session."""

    def __init__(self, session: str, pid: int, sock: int) -> None:
        self.session = session
        self.pid = pid
        self.sock = sock
        self.used = time.monotonic()
        self.executions = 0
        self.alive = True


class Workers(Part):
    """The zygote's side of persistent interpreters."""

    def start_persistent(self, run: Run, job: dict[str, Any]) -> None:
        session = str(job.get("session") or "")
        worker = self.workers.get(session)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        run.out_r, run.err_r, run.chan = out_r, err_r, chan
        try:
            for attempt in range(2):
                if worker is None or not worker.alive:
                    worker = self.spawn_worker(session)
                worker.used = time.monotonic()
                worker.executions += 1
                frame = _proto.encode_json({"op": "exec", "code": job["code"], "n": worker.executions,
                                            "host_token": job.get("host_token"),
                                            "fresh": bool(job.get("fresh_globals"))})
                try:
                    _send_with_fds(worker.sock, frame, [out_w, err_w, child_chan])
                    break
                except OSError:
                    # The interpreter died since its last execution; its
                    # state is gone, so start a fresh one.
                    self.workers.pop(session, None)
                    self.kill_worker(worker)
                    worker = None
                    if attempt == 1:
                        raise
            assert worker is not None
            run.worker, run.pid = worker, worker.pid
        finally:
            for fd in (out_w, err_w, child_chan):
                os.close(fd)

    def spawn_worker(self, session: str) -> Worker:
        if len(self.workers) >= _MAX_WORKERS:
            oldest = min(self.workers.values(), key=lambda w: w.used)
            self.workers.pop(oldest.session, None)
            self.kill_worker(oldest)
        pid, sock = _fork_connected()
        if pid == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            self.enter_child(devnull, devnull, sock)
            _worker_main(3, self.stable_roots())
        worker = Worker(session, pid, sock)
        self.workers[session] = worker
        return worker

    def stable_roots(self) -> list[str]:
        """Where the modules that may stay loaded in a reused interpreter
        come from: the standard library, site-packages and this runtime,
        none of which change while the sandbox lives."""
        return [os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(cexec.__file__)), *self.opts.site_path]

    def retire_worker(self, run: Run) -> None:
        """End the interpreter of a fresh-globals execution that could not
        be put back (its done message says why): the session's next
        execution gets a new one."""
        worker = run.worker
        if worker is None or run.done is None or not run.done.get("retire"):
            return
        if self.workers.get(worker.session) is worker:
            self.workers.pop(worker.session, None)
        self.kill_worker(worker)

    def kill_worker(self, worker: Worker) -> None:
        worker.alive = False
        _close(worker.sock)
        _kill_reap(worker.pid, group=True)


def _recv_job(sock: int, reader: _proto.Reader, fds: list[int]) -> dict[str, Any] | None:
    """Read one job frame from the zygote, collecting passed descriptors."""
    s = socket.socket(fileno=sock)
    try:
        while True:
            for kind, payload in reader.frames():
                if kind == _proto.KIND_JSON:
                    return _proto.decode_json(payload)
            data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(16 * 4))
            for level, typ, blob in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    n = len(blob) // 4
                    fds.extend(struct.unpack(f"{n}i", blob[: n * 4]))
            if not data:
                return None
            reader.feed(data)
    finally:
        s.detach()


def _worker_main(sock: int, stable_roots: list[str]) -> None:
    """Body of a persistent interpreter: run jobs with shared globals, or
    each in new globals (a job's "fresh"), put back afterwards as
    _fresh.Baseline says."""
    try:
        module = _new_main()
        reader = _proto.Reader()
        devnull = os.open(os.devnull, os.O_RDWR)
        sys.argv = ["-c"]
        baseline: Baseline | None = None
        while True:
            fds: list[int] = []
            job = _recv_job(sock, reader, fds)
            if job is None:
                os._exit(0)
            if len(fds) != 3:
                os._exit(71)
            out_w, err_w, chan_fd = fds
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_w)
            os.close(err_w)
            fresh = bool(job.get("fresh"))
            if fresh and baseline is None:
                baseline = Baseline(stable_roots, ignore={chan_fd})
            chan = cexec._Channel(chan_fd)
            cexec._begin(chan, job.get("host_token"))
            import importlib  # not at start: a new sandbox need not import it

            importlib.invalidate_caches()
            code = str(job.get("code"))
            before = resource.getrusage(resource.RUSAGE_SELF)
            if fresh:
                main = _new_main()
                done = _run_program(code, main, "<cexec>")
                _wind_up()
                # Functions hold their globals, which hold them: clearing
                # the globals frees what the program kept there (closing its
                # files) without waiting for the garbage collector.
                main.__dict__.clear()
                del main
            else:
                # Functions from earlier executions may fail later: keep
                # every execution's source for their tracebacks.
                import linecache

                filename = f"<cexec:{job.get('n')}>"
                linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
                done = _run_program(code, module, filename)
                _flush_std()
            after = resource.getrusage(resource.RUSAGE_SELF)
            done["cpu_ms"] = int((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
            done["max_rss"] = int(after.ru_maxrss) * 1024
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            if baseline is not None:
                sys.modules["__main__"] = module
                why = baseline.reset(ignore={chan_fd})
                if why:
                    done["retire"] = why
            try:
                chan.send(done, chan.result_json)
            except OSError:
                pass
            chan.close()
            cexec._end()
    except BaseException:
        os._exit(70)
