"""Running the real kubectl against a test server, reading what it prints, and one object builder
per served kind, for the kubectl tests of tests/clients.

Each kubectl gets a temp kubeconfig (``user: {}``, plain http), a temp HOME and its own
``--cache-dir``, so discovery is never served from a stale cache of another server.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from kube.objects import Obj
from tests.helpers import claim, device_class, pod

VENV_KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
DISPATCHER = "/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None


# ---- running kubectl -------------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.code}\n--- stdout\n{self.out}--- stderr\n{self.err}"


class Kubectl:
    """One kubectl binary bound to one server through a private kubeconfig and cache."""

    def __init__(self, binary: str, server_url: str, home: Path) -> None:
        self.binary = binary
        self.home = home
        self.kubeconfig = home / "kubeconfig"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "test", "cluster": {"server": server_url}}],
                    "users": [{"name": "test", "user": {}}],
                    "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                    "current-context": "test",
                }
            )
        )
        self.cache_dir = home / "cache"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "KUBECONFIG": str(self.kubeconfig),
            "LANG": "C.UTF-8",
        }

    def argv(self, args: tuple[str, ...]) -> list[str]:
        return [self.binary, "--cache-dir", str(self.cache_dir), *args]

    def run(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> Run:
        argv = self.argv(args)
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env={**self.env, **(env or {})}, timeout=timeout)
        return Run(argv, proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **kwargs: Any) -> str:
        result = self.run(*args, **kwargs)
        assert result.code == 0, str(result)
        return result.out

    def fails(self, *args: str, **kwargs: Any) -> Run:
        result = self.run(*args, **kwargs)
        assert result.code != 0, str(result)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json"))

    def background(self, *args: str, env: dict[str, str] | None = None) -> Background:
        argv = self.argv(args)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**self.env, **(env or {})})
        return Background(argv, proc)


@dataclass
class Background:
    """A running kubectl whose stdout lines arrive on a queue (``get -w``, ``wait``).

    Both pipes are drained by threads, so a chatty ``-v`` never fills a pipe and blocks kubectl,
    and :meth:`finish` reads to end of file instead of guessing how long the last line takes.
    """

    argv: list[str]
    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)
    err_lines: list[str] = field(default_factory=list)
    pumps: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err_lines.append), daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line.rstrip("\n"))

    def expect(self, predicate: Callable[[str], bool], timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise AssertionError(f"no matching line from {' '.join(self.argv)} within {timeout}s; saw {self.seen}; stderr: {self.stderr()}")
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"{' '.join(self.argv)} exited {self.proc.returncode}; saw {self.seen}; stderr: {self.stderr()}") from None
                continue
            self.seen.append(line)
            if predicate(line):
                return line

    def expect_stderr(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        """The first stderr line (``-v=6`` request logs, say) that matches, waiting for it."""
        deadline = time.monotonic() + timeout
        checked = 0
        while time.monotonic() < deadline:
            lines = list(self.err_lines)
            for line in lines[checked:]:
                if predicate(line):
                    return line
            checked = len(lines)
            if self.proc.poll() is not None and not any(pump.is_alive() for pump in self.pumps):
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"no matching stderr line from {' '.join(self.argv)}; stderr: {self.stderr()}")

    def finish(self, timeout: float = 30.0) -> Run:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{' '.join(self.argv)} still running after {timeout}s; saw {self.seen}") from None
        for pump in self.pumps:
            pump.join(10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return Run(self.argv, code, "\n".join(self.seen) + "\n", self.stderr())

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "<running>"
        return "".join(line + "\n" for line in self.err_lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- reading what kubectl prints ------------------------------------------------------


def parse_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Columns and rows of kubectl's tabular output (columns are >= 3 spaces apart)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no table printed"
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (name, start) in enumerate(columns):
            end = columns[i + 1][1] if i + 1 < len(columns) else None
            row[name] = line[start:end].strip()
        rows.append(row)
    return [name for name, _ in columns], rows


def names_in(text: str, column: str = "NAME") -> list[str]:
    return [row[column] for row in parse_table(text)[1]]


def write(tmp_path: Path, name: str, *docs: Obj) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def created(api: httpx.Client, path: str, body: Obj) -> Obj:
    response = api.post(path, json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


# ---- one builder per served kind -------------------------------------------------------


def _with(body: Obj, name: str, labels: dict[str, str]) -> Obj:
    body["metadata"] = {**body.get("metadata", {}), "name": name, "labels": dict(labels)}
    return body


def defaulted_spec() -> Obj:
    """A claim spec as the server stores it (v1 defaults: allocationMode ExactCount, count 1).

    Manifests spell the defaults out: the request list is atomic, so a manifest that omits
    them differs from the live object and client-side apply would never say "unchanged"
    (nor would server-side apply co-own the list with another manager) - upstream too.
    """
    spec = claim()["spec"]
    spec["devices"]["requests"][0]["exactly"].update({"allocationMode": "ExactCount", "count": 1})
    return spec


def build_claim(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = _with(claim(name), name, labels)
    body["spec"] = defaulted_spec()
    return body


def build_template(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "spec": {"spec": claim()["spec"]}}
    return _with(body, name, labels)


def build_slice(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": f"{name}-node",
            "pool": {"name": f"{name}-pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }
    return _with(body, name, labels)


def build_class(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with(device_class(name), name, labels)


def build_taint_rule(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "pool-a"},
            "taint": {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"},
        },
    }
    return _with(body, name, labels)


def build_pod(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with(pod(name), name, labels)


def build_node(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "v1", "kind": "Node", "spec": {}}, name, labels)


def build_namespace(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "v1", "kind": "Namespace"}, name, labels)


def build_event(name: str, ns: str, labels: dict[str, str]) -> Obj:
    stamp = now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "some-pod", "namespace": ns},
        "reason": "Testing",
        "message": f"hello from {name}",
        "type": "Normal",
        "source": {"component": "pytest"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    return _with(body, name, labels)


def build_lease(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"holderIdentity": "holder-1", "leaseDurationSeconds": 15}}
    return _with(body, name, labels)


def build_priority_class(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 100}, name, labels)


ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool-a", "device": "gpu-0"}]},
}
