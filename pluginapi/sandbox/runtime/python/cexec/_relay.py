"""One execution as the zygote relays it: the program's output, host calls
and replies between the program and the host, until the program ends."""

from __future__ import annotations

import os
import select
import time

from cexec import _proto
from cexec._osutil import _POLLIN, _READ_SIZE, _close, _rss_bytes
from cexec._parts import Part
from cexec._sweep import _KILL_GRACE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cexec._workers import Worker

# Output is relayed at most this long after the program wrote it, or once
# this much is waiting: what a program prints just before it ends then
# travels with its result, in one write to the host and one wake-up of
# every process on the way, instead of two.
_OUTPUT_DELAY = 0.002
_OUTPUT_BATCH = 64 << 10


class Run:
    """The zygote's state of one execution."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.id = job.get("id")
        self.timeout = float(job.get("timeout_ms") or 30000) / 1000.0
        self.limit = int(job.get("output_limit") or (1 << 20))
        self.deadline = time.monotonic() + self.timeout
        self.pid = 0
        self.worker: Worker | None = None
        self.out_r = -1
        self.err_r = -1
        self.chan = -1
        self.chan_reader = _proto.Reader()
        self.outbox = bytearray()
        # Output frames not yet written to the host (see _OUTPUT_DELAY).
        self.outq: list[bytes] = []
        self.outq_bytes = 0
        self.outq_since = 0.0
        self.eof = 0  # output pipes that reached end of file
        self.sent = 0
        self.truncated = False
        self.timed_out = False
        self.cancelled = False
        self.killed = False
        self.kill_time = 0.0
        self.done: dict[str, Any] | None = None
        self.status: int | None = None
        self.rusage: Any = None
        self.clean = True
        self.note = ""
        # A rehearsal (Zygote.rehearse) has no processes of its own.
        self.rehearsal = False
        # The program's process is the fork server's child (see _forker).
        self.by_server = False
        # The program's process became another's child (its fork server
        # died and the zygote is not the pid namespace's init), so its exit
        # status cannot be read: its end shows as its pipes' and channel's.
        self.orphaned = False
        self.chan_eof = False


class Relay(Part):
    """The zygote's side of a running execution."""

    def pump(self, run: Run) -> None:
        """Relay output, host calls and replies until the execution ends."""
        os.set_blocking(run.chan, False)
        poller = select.poll()
        fds = {run.out_r, run.err_r, run.chan, self.ctl_in, self.wake_r}
        for fd in fds:
            poller.register(fd, _POLLIN)
        server = self.forker.sock if run.by_server and self.forker is not None else -1
        if server >= 0:
            poller.register(server, _POLLIN)
        self.check_exit(run)
        while not self.finished(run) or self.unread(run, fds):
            now = time.monotonic()
            if not run.killed and now >= run.deadline:
                run.timed_out = True
                self.kill(run)
            if run.killed and now - run.kill_time > _KILL_GRACE:
                run.clean = False
                run.note = "the program's processes did not die after SIGKILL"
                return
            wait = (run.kill_time + _KILL_GRACE) if run.killed else run.deadline
            if run.outq:
                wait = min(wait, run.outq_since + _OUTPUT_DELAY)
            for fd, _ in poller.poll(max(0, int((wait - now) * 1000)) + 1):
                if fd == run.out_r or fd == run.err_r:
                    if not self.relay_output(run, fd, run.out_r == fd):
                        poller.unregister(fd)
                        if run.truncated:
                            for other in (run.out_r, run.err_r):
                                if other in fds and other != fd:
                                    poller.unregister(other)
                                    fds.discard(other)
                        fds.discard(fd)
                elif fd == run.chan:
                    if not self.relay_channel(run, poller):
                        poller.unregister(fd)
                        fds.discard(fd)
                elif fd == self.ctl_in:
                    if not self.read_host():
                        self.kill(run)
                        self.shutdown()
                    self.handle_host_during(run, poller)
                elif fd == self.wake_r:
                    try:
                        os.read(self.wake_r, 512)
                    except BlockingIOError:
                        pass
                    self.check_exit(run)
                elif fd == server:
                    self.check_exit(run)
                    if self.forker is None or self.forker.sock != server:
                        poller.unregister(server)
                        server = -1
            if run.outq and time.monotonic() - run.outq_since >= _OUTPUT_DELAY:
                self.flush_output(run)

    def unread(self, run: Run, fds: set[int]) -> bool:
        """Whether a program that has exited left output, frames or the end
        of its pipes to read at once: read, they let it end cleanly (see
        ended_cleanly) rather than by a sweep of the sandbox. A fast
        program often exits before the zygote has read its last frame."""
        if run.status is None or run.killed or run.worker is not None:
            return False
        live = [fd for fd in (run.out_r, run.err_r, run.chan) if fd in fds]
        if not live:
            return False
        p = select.poll()
        for fd in live:
            p.register(fd, _POLLIN)
        return bool(p.poll(0))

    def finished(self, run: Run) -> bool:
        if self.ended_cleanly(run):
            return True
        if run.worker is not None and not run.killed and run.done is not None:
            # The interpreter is done but something it started still holds
            # the output pipes: collect() kills it.
            return True
        return run.status is not None or run.orphaned and run.eof == 2 and run.chan_eof

    def ended_cleanly(self, run: Run) -> bool:
        """The program reported its end and both output pipes are at end of
        file, so everything it printed has been relayed."""
        return run.done is not None and run.eof == 2 and not run.killed

    def close_fds(self, run: Run) -> None:
        for fd in (run.out_r, run.err_r, run.chan):
            if fd >= 0:
                _close(fd)
        run.out_r = run.err_r = run.chan = -1

    def check_exit(self, run: Run) -> None:
        if run.status is not None or run.orphaned or self.forked_exit(run):
            return
        try:
            pid, status, rusage = os.wait4(run.pid, os.WNOHANG)
        except ChildProcessError:
            run.orphaned = True
            return
        if pid == run.pid:
            run.status, run.rusage = status, rusage
            if run.worker is not None:
                run.worker.alive = False
                self.workers.pop(run.worker.session, None)
                _close(run.worker.sock)

    def relay_output(self, run: Run, fd: int, stdout: bool) -> bool:
        """Forward one chunk; False when the pipe is finished with."""
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return True
        if not data:
            run.eof += 1
            return False
        room = run.limit - run.sent
        if len(data) > room:
            data = data[:room]
            run.truncated = True
        if data:
            run.sent += len(data)
            self.send_output(run, data, stdout)
        if run.truncated:
            self.kill(run)
            return False
        return True

    def send_output(self, run: Run, data: bytes, stdout: bool) -> None:
        """Queue output for the host (see _OUTPUT_DELAY)."""
        if not run.outq:
            run.outq_since = time.monotonic()
        run.outq.append(_proto.encode(_proto.KIND_STDOUT if stdout else _proto.KIND_STDERR, data))
        run.outq_bytes += len(data)
        if run.outq_bytes >= _OUTPUT_BATCH:
            self.flush_output(run)

    def flush_output(self, run: Run, then: bytes = b"") -> None:
        """Write the queued output, and then a frame, to the host at once."""
        if run.outq:
            then = b"".join(run.outq) + then
            run.outq.clear()
            run.outq_bytes = 0
        if then:
            self.write(then)

    def relay_channel(self, run: Run, poller: select.poll) -> bool:
        """Handle what the program sent on its channel, and flush replies."""
        if run.outbox:
            try:
                n = os.write(run.chan, run.outbox)
                del run.outbox[:n]
            except BlockingIOError:
                pass
            except OSError:
                run.outbox.clear()
            if not run.outbox:
                poller.modify(run.chan, _POLLIN)
        try:
            data = os.read(run.chan, _READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            run.chan_eof = True
            return False
        run.chan_reader.feed(data)
        try:
            for kind, payload in run.chan_reader.frames():
                if kind != _proto.KIND_JSON:
                    continue
                msg = _proto.decode_json(payload)
                op = msg.get("op")
                call_id = msg.get("id")
                if op == "call" and isinstance(call_id, int) and isinstance(msg.get("method"), str):
                    # What the program printed before the call goes first.
                    self.flush_output(run, _proto.encode_json(
                        {"op": "call", "id": call_id, "method": msg["method"], "params": msg.get("params")}))
                elif op == "done" and run.done is None:
                    run.done = msg
        except _proto.ProtocolError:
            # The program wrote garbage on its own channel; it loses host
            # calls, nothing else.
            return False
        return True

    def handle_host_during(self, run: Run, poller: select.poll) -> None:
        keep: list[dict[str, Any]] = []
        for msg in self.inbox:
            op = msg.get("op")
            if op == "reply":
                if msg.get("exec") == run.id and run.chan >= 0 and not run.killed:
                    frame = msg.get("frame")
                    if isinstance(frame, bytes):
                        run.outbox += _proto.encode(_proto.KIND_JSON, frame)
                    else:
                        run.outbox += _proto.encode_json(msg)
                    try:
                        poller.modify(run.chan, _POLLIN | select.POLLOUT)
                    except (KeyError, FileNotFoundError):
                        pass
            elif op == "cancel":
                if msg.get("id") == run.id:
                    run.cancelled = True
                    self.kill(run)
            elif op == "ping":
                self.send({"op": "pong", "id": msg.get("id"), "rss": _rss_bytes(), "workers": len(self.workers),
                           "executions": self.executions, "busy": True})
            elif op == "exec":
                self.send({"op": "result", "id": msg.get("id"), "exit_code": 1, "clean": True,
                           "error": {"type": "RunnerError", "message": "the sandbox is busy with another execution"}})
            else:
                keep.append(msg)
        self.inbox = keep

    def drain(self, run: Run, until_eof: bool) -> None:
        """Read what is left in the output pipes and the channel."""
        for fd in (run.out_r, run.err_r):
            if fd < 0 or run.truncated:
                continue
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, _READ_SIZE)
                except BlockingIOError:
                    break
                if not data:
                    break
                room = run.limit - run.sent
                if len(data) > room:
                    data = data[:room]
                    run.truncated = True
                if data:
                    run.sent += len(data)
                    self.send_output(run, data, fd == run.out_r)
                if run.truncated:
                    break
            if until_eof:
                _close(fd)
                if fd == run.out_r:
                    run.out_r = -1
                else:
                    run.err_r = -1
        if run.chan >= 0:
            while True:
                try:
                    data = os.read(run.chan, _READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                run.chan_reader.feed(data)
            try:
                for kind, payload in run.chan_reader.frames():
                    if kind == _proto.KIND_JSON and run.done is None:
                        msg = _proto.decode_json(payload)
                        if msg.get("op") == "done":
                            run.done = msg
            except _proto.ProtocolError:
                pass
