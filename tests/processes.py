"""Helpers for tests that run real processes: worker subprocesses and polling with a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from devtools.progress import STALL_LIMIT, START_TIMEOUT, Progress
from devtools.server import REPO_ROOT, stop_process
from kube.client import KubeClient
from kube.errors import ApiError
from kube.informer import Informer

DEFAULT_TIMEOUT = 30.0


def eventually(check: Callable[[], Any], what: str = "condition", timeout: float = DEFAULT_TIMEOUT, interval: float = 0.05) -> Any:
    """Poll until ``check()`` returns something truthy and return it; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what}: not met in {timeout}s"
        time.sleep(interval)


def eventually_while_progressing(
    check: Callable[[], Any], what: str, processes: Sequence[tuple[subprocess.Popen[bytes], Path | None]],
    timeout: float = START_TIMEOUT, stall: float = STALL_LIMIT, interval: float = 0.1,
) -> Any:  # fmt: skip
    """``eventually`` for what starting processes bring about: it waits as long as one of them makes
    progress (its log grows or it spends CPU time), at most ``timeout`` seconds, and fails once none
    has for ``stall`` seconds or one exits, naming what it waited for and the processes' last lines."""
    watched = [(process, Progress(process.pid, log)) for process, log in processes]
    started = last_progress = time.monotonic()
    while True:
        result = check()
        if result:
            return result
        now = time.monotonic()
        for process, progress in watched:
            assert process.poll() is None, f"{what}: {process.args!r} exited with {process.returncode}{progress.log_tail()}"
            if progress.moved():
                last_progress = now
        tails = "".join(progress.log_tail(3) for _, progress in watched)
        assert now - last_progress < stall, f"{what}: no process made progress for {stall:.0f} s (after {now - started:.0f} s){tails}"
        assert now - started < timeout, f"{what}: not met in {timeout:.0f} s although the processes kept working{tails}"
        time.sleep(interval)


async def eventually_async(check: Callable[[], Awaitable[Any]], what: str = "condition", timeout: float = DEFAULT_TIMEOUT, interval: float = 0.05) -> Any:
    """``eventually`` for tests whose workers run in this event loop: ``check`` is awaited, and the
    loop runs them while this waits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert loop.time() < deadline, f"{what}: not met in {timeout}s"
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, Any], synced: Sequence[Informer] = ()) -> AsyncIterator[None]:
    """Run ``work`` in a task of this event loop while the block runs, which starts once the
    ``synced`` informers (started by ``work``) have synced."""
    task = asyncio.create_task(work)
    try:
        for informer in synced:
            await informer.wait_synced(10)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def get_or_none(client: KubeClient, path: str) -> dict[str, Any] | None:
    """The object at ``path``, or None when there is none."""
    try:
        return await client.get(path)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


class Worker:
    """``python -m <module> <args>`` with its output in a log file."""

    def __init__(self, module: str, args: list[str], log_path: Path) -> None:
        self.module = module
        self.args = args
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen([sys.executable, "-m", self.module, *self.args], cwd=REPO_ROOT, stdout=log, stderr=log)
        log.close()
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        stop_process(self.process)
