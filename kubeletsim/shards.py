"""``python -m kubeletsim --shards N``: one node range run by N simulator processes.

One process keeps a few thousand nodes healthy (its event loop is one core at most); beyond that
the range is split. Each child is ``python -m kubeletsim`` with the same flags and ``--shard
K/N``, so it owns a contiguous part of the range (its Nodes, their Leases, ResourceSlices and
pods) and no two children ever touch one node. This parent only starts them, serves
``/healthz`` for all of them (200 while every child runs) and stops them: on SIGTERM/SIGINT it
passes the signal on and waits; when a child exits on its own, it stops the others and exits with
that child's code, so whatever supervises it (compose, systemd) restarts the whole range.
Running the shards as separate commands (``--shard 0/4`` .. ``--shard 3/4``) does the same where
each should talk to another API server replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Sequence

from kube.health import serve_health
from kube.tasks import wait_for

log = logging.getLogger("kubeletsim")

# Flags (with their values) that belong to this parent only.
PARENT_FLAGS = ("--shards", "--health-port", "--healthz-port")
# Environment variables the children must not read as theirs.
PARENT_ENV = ("DRA_KUBELETSIM_SHARDS", "DRA_HEALTH_PORT")
STOP_SECONDS = 20.0


def child_argv(argv: Sequence[str], index: int, count: int) -> list[str]:
    """The command line of shard ``index`` of ``count``: this one without the parent's flags, plus ``--shard``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in PARENT_FLAGS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return [*out, "--shard", f"{index}/{count}"]


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in PARENT_ENV}


def _end_with_parent() -> None:
    """In the child, before it runs: a SIGTERM when the parent dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG; elsewhere the children outlive a killed parent)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


async def supervise(argv: Sequence[str], count: int, health_port: int = 0) -> int:
    """Run ``count`` shards of the command line ``argv`` until a signal (exit 0) or until one exits (its code)."""
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubeletsim", *child_argv(argv, i, count), env=child_env(), preexec_fn=_end_with_parent
        )
        for i in range(count)
    ]
    log.info("started shards", extra={"shards": count, "pids": [c.pid for c in children]})
    health = await serve_health(health_port, lambda: all(c.returncode is None for c in children), host="0.0.0.0") if health_port else None
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    waits = {asyncio.ensure_future(c.wait()): c for c in children}
    stop = asyncio.ensure_future(stopping.wait())
    code = 0
    try:
        done, _ = await asyncio.wait([*waits, stop], return_when=asyncio.FIRST_COMPLETED)
        exited = [waits[t] for t in done if t in waits]
        if exited:
            code = exited[0].returncode or 1
            log.error("a shard exited; stopping the others", extra={"pid": exited[0].pid, "exitCode": exited[0].returncode})
    finally:
        for child in children:
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.terminate()
        for child in children:
            try:
                await wait_for(child.wait(), STOP_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
        stop.cancel()
        if health is not None:
            health.close()
    return code
