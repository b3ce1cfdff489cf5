"""``/healthz``, ``/livez`` and ``/readyz`` in upstream's format.

Each path runs a list of named checks. The answer is ``ok``, or with ``?verbose`` one line per
check (``[+]ping ok``) and ``readyz check passed``; a failing check makes it a 500 that lists
``[-]etcd failed: reason withheld`` (the reason goes to the log, and to ``/readyz/etcd``, the path
of that one check). ``?exclude=NAME`` (repeatable) skips a check.

The database is probed under upstream's check names, ``etcd`` and ``etcd-readiness``, so probes
and dashboards written for kube-apiserver work unchanged. Unlike upstream, ``/livez`` leaves the
database out: restarting the server does not bring the database back, and a server that cannot
reach it answers every request promptly with a Status that says so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from app.storage.probe import StorageProbe
from app.storage.storage import Storage
from kube.errors import go_quote
from kube.query import query_pairs

log = logging.getLogger("app.health")

PLAIN_TEXT = b"text/plain; charset=utf-8"


@dataclass(frozen=True)
class Check:
    """A named check: ``run`` returns when healthy and raises the reason otherwise."""

    name: str
    run: Callable[[], Awaitable[None]]


async def _ping() -> None:
    return None


def storage_checks(storage: Storage, health_timeout: float, ready_timeout: float) -> dict[str, list[Check]]:
    """The checks of each health path of an API server on ``storage``."""
    health_probe = StorageProbe(storage, health_timeout)
    ready_probe = StorageProbe(storage, ready_timeout)

    async def loops() -> None:
        stopped = storage.stopped_loop()
        if stopped is not None:
            raise RuntimeError(f"the storage loop {stopped!r} has stopped")

    ping = Check("ping", _ping)
    etcd = Check("etcd", health_probe.check)
    readiness = Check("etcd-readiness", ready_probe.check)
    storage_loops = Check("storage-loops", loops)
    return {
        "healthz": [ping, etcd, storage_loops],
        "livez": [ping, storage_loops],
        "readyz": [ping, etcd, readiness, storage_loops],
    }


class HealthEndpoints:
    """Serves the health paths of ``groups`` (path name -> checks); everything else goes to ``app``."""

    def __init__(self, app: ASGIApp, groups: dict[str, list[Check]]) -> None:
        self.app = app
        self.groups = groups
        self._failing: dict[str, bool] = {}

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself: the caller awaits the one chosen, so that every other request's
        # task is resumed through one frame fewer.
        if scope["type"] == "http":
            group, _, check_name = scope["path"][1:].partition("/")
            checks = self.groups.get(group)
            if checks is not None:
                if not check_name:
                    return self._aggregate(group, checks, scope["query_string"], send)
                for check in checks:
                    if check.name == check_name:
                        return self._single(check, send)
        return self.app(scope, receive, send)

    async def _aggregate(self, group: str, checks: list[Check], query: bytes, send: Send) -> None:
        params = query_pairs(query)
        excluded = {value for key, value in params if key == "exclude"}
        lines: list[str] = []
        failures: list[str] = []
        for check in checks:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok\n")
                continue
            try:
                await check.run()
            except Exception as exc:
                lines.append(f"[-]{check.name} failed: reason withheld\n")
                failures.append(f"[-]{check.name} failed: {exc}")
            else:
                lines.append(f"[+]{check.name} ok\n")
        if excluded:
            names = ",".join(go_quote(name) for name in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
            log.warning("cannot exclude some health checks, no health checks are installed matching %s", names)
        self._note(group, failures)
        if failures:
            await _reply(send, 500, "".join(lines) + f"{group} check failed\n", nosniff=True)
        elif any(key == "verbose" for key, _ in params):
            await _reply(send, 200, "".join(lines) + f"{group} check passed\n", nosniff=True)
        else:
            await _reply(send, 200, "ok", nosniff=True)

    def _note(self, group: str, failures: list[str]) -> None:
        """Log when a health path starts or stops failing (not on every probe of a load balancer)."""
        failing = bool(failures)
        if self._failing.get(group, False) != failing:
            self._failing[group] = failing
            if failing:
                log.info("%s check failed:\n%s", group, "\n".join(failures))
            else:
                log.info("%s check passed", group)

    async def _single(self, check: Check, send: Send) -> None:
        try:
            await check.run()
        except Exception as exc:
            await _reply(send, 500, f"internal server error: {exc}\n", nosniff=True)
            return
        await _reply(send, 200, "ok", nosniff=False)


async def _reply(send: Send, status: int, body: str, *, nosniff: bool) -> None:
    raw = body.encode()
    headers = [(b"content-type", PLAIN_TEXT), (b"content-length", str(len(raw)).encode())]
    if nosniff:
        headers.append((b"x-content-type-options", b"nosniff"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})
