"""docker-compose.yml and the Dockerfile, proved without a Docker engine.

The structural tests read the compose file (with compose's ``${VAR:-default}``
interpolation and YAML merge keys) and the Dockerfile and check what compose relies on:
services, ``depends_on`` conditions, healthchecks, the named volume, the published port,
one shared image and environment.

The end-to-end test builds the image's file set first: exactly the files the Dockerfile's
``COPY`` lines copy (less what ``.dockerignore`` keeps out of the build context) go to a
temporary directory, the image's WORKDIR, and the Dockerfile's ``RUN`` commands install them
there into a venv (``pip`` and ``python`` are the venv's; the system commands, apt-get,
useradd and the like, are skipped; ``--no-cache-dir`` is dropped so pip's wheel cache
serves). Then it runs every service except ``postgres`` as a local process from that
directory, in ``depends_on`` order, with the argv compose would run (``entrypoint`` +
``command``, else the image's CMD; ``python`` is the venv's) and the environment compose
would give it (the image's ``ENV`` plus the service's ``environment``). Only addresses are
rewritten: service hostnames and ``0.0.0.0`` become ``127.0.0.1``, container ports become
free local ports, and the database URL points at a throwaway Postgres (same scheme, that
server's credentials). Healthchecks run as the same commands compose would run. Then the
compose example is applied over HTTP (examples/gpu-deviceclass.yaml and
examples/pod-with-claim-template.yaml), the pod ``gpu-pod`` must go Running with its
generated claim allocated, and ``kubectl dra why`` (the image's) must get the scheduler's
explanation through the published port.

The install compiles the hot modules as the image does (setup.py, mypyc), which takes a few
minutes of CPU; ``DRA_PURE_PYTHON=1`` in the test's environment skips that and the check that
follows it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import yaml

from devtools.ports import free_port
from devtools.postgres import PostgresNotAvailable, database_url_for_tests, find_postgres_bin
from devtools.server import REPO_ROOT
from kube.features import Gate, gates_flag

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
EXAMPLES = REPO_ROOT / "examples"
# The compose example: a DeviceClass, then a pod whose claim comes from a template.
COMPOSE_EXAMPLE = (EXAMPLES / "gpu-deviceclass.yaml", EXAMPLES / "pod-with-claim-template.yaml")

APP_SERVICES = ("pki", "migrate", "apiserver", "grants", "scheduler", "controller", "kubeletsim")
WORKERS = ("scheduler", "controller", "kubeletsim")
E2E_TIMEOUT = 180.0  # from the pki job to gpu-pod Running, on a busy machine

# kind -> (plural, namespaced) for the kinds in examples/
PLURALS: dict[str, tuple[str, bool]] = {
    "Namespace": ("namespaces", False),
    "DeviceClass": ("deviceclasses", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "Pod": ("pods", True),
}


# ------------------------------------------------------------------ compose file


_INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution: ``$VAR``, ``${VAR}``, ``${VAR:-d}``, ``${VAR-d}``, ``${VAR:?e}``, ``${VAR:+a}``, ``$$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        unset_or_empty = not current
        if op in (":-", "-"):
            return arg if (unset_or_empty if op == ":-" else current is None) else str(current)
        if op in (":?", "?"):
            if unset_or_empty if op == ":?" else current is None:
                raise ValueError(f"required variable {name} is missing: {arg}")
            return str(current)
        if op in (":+", "+"):
            return "" if (unset_or_empty if op == ":+" else current is None) else arg
        return current or ""

    return _INTERPOLATION.sub(sub, value)


def _interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, env) for k, v in node.items()}
    return node


def load_compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compose file as compose sees it: YAML (merge keys resolved), then interpolated."""
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(raw, dict)
    return dict(_interpolate_tree(raw, os.environ if env is None else env))


def environment_of(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's ``environment`` (mapping or ``KEY=VALUE`` list form) as strings."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item, "")) for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """``depends_on`` as {service: condition} (the short list form means ``service_started``)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def start_order(services: Mapping[str, Any]) -> list[str]:
    """Services in an order that honours ``depends_on`` (stable by file order)."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        assert name not in visiting, f"depends_on cycle through {name}"
        visiting.add(name)
        for dep in depends_on(services[name]):
            assert dep in services, f"{name} depends on unknown service {dep}"
            visit(dep)
        visiting.discard(name)
        order.append(name)

    for name in services:
        visit(name)
    return order


def seconds(duration: str | int | float | None, default: float) -> float:
    """A compose duration (``1m30s``, ``2s``, ``500ms``) in seconds."""
    if duration is None:
        return default
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"bad duration {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)


# ---------------------------------------------------------------------- Dockerfile


@dataclass
class Image:
    """What the Dockerfile gives a container: base, env, workdir, user, ports, entrypoint and CMD."""

    base: str = ""
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "root"
    expose: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    copies: list[list[str]] = field(default_factory=list)


def _exec_form(arg: str) -> list[str]:
    arg = arg.strip()
    if arg.startswith("["):
        parsed = json.loads(arg)
        assert isinstance(parsed, list)
        return [str(x) for x in parsed]
    return ["/bin/sh", "-c", arg]


def parse_dockerfile(text: str) -> Image:
    """A small Dockerfile reader for the instructions this project's Dockerfile uses."""
    image = Image()
    logical = re.sub(r"\\\n", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arg = line.partition(" ")
        instruction, arg = instruction.upper(), arg.strip()
        if instruction == "FROM":
            image.base = arg.split()[0]
        elif instruction == "ENV":
            tokens = shlex.split(arg)
            if tokens and "=" not in tokens[0]:
                image.env[tokens[0]] = " ".join(tokens[1:])
            else:
                image.env.update({k: v for k, _, v in (t.partition("=") for t in tokens)})
        elif instruction == "WORKDIR":
            image.workdir = arg
        elif instruction == "USER":
            image.user = arg
        elif instruction == "EXPOSE":
            image.expose += arg.split()
        elif instruction == "ENTRYPOINT":
            image.entrypoint = _exec_form(arg)
        elif instruction == "CMD":
            image.cmd = _exec_form(arg)
        elif instruction == "RUN":
            image.runs.append(arg)
        elif instruction == "COPY":
            image.copies.append([a for a in shlex.split(arg) if not a.startswith("--")])
    return image


def service_argv(service: Mapping[str, Any], image: Image) -> list[str]:
    """What compose executes: entrypoint (service's, else image's) + command (service's, else image's CMD)."""

    def as_list(value: str | list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]

    entrypoint = as_list(service.get("entrypoint"))
    command = as_list(service.get("command"))
    if entrypoint is not None:  # compose: overriding the entrypoint also drops the image's CMD
        return entrypoint + (command or [])
    return image.entrypoint + (command if command is not None else image.cmd)


# --------------------------------------------------------------- the image's files

# What a RUN line may do besides pip and python: system setup the local venv needs no copy of.
SYSTEM_COMMANDS = {"apt-get", "useradd", "mkdir", "chown", "rm"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def dockerignore_patterns() -> list[str]:
    return [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def ignored_by(patterns: list[str], relative: str) -> bool:
    """Whether ``.dockerignore`` keeps a path (relative to the build context) out (its `**/` and glob forms; no `!`)."""
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if pattern.startswith("**/"):
            if fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern[3:]) or fnmatch.fnmatchcase(relative, pattern[3:]):
                return True
        elif fnmatch.fnmatchcase(relative, pattern):
            return True
    return False


def copy_image_files(image: Image, root: Path) -> None:
    """What the COPY lines put under the WORKDIR (``root``), from the build context (the checkout)."""
    patterns = dockerignore_patterns()
    for copy in image.copies:
        *sources, dest = copy
        target = root / dest if not dest.startswith("/") else root / Path(dest).relative_to(image.workdir)
        for src in sources:
            path = REPO_ROOT / src
            assert not ignored_by(patterns, src.rstrip("/")), f"COPY {src} is excluded by .dockerignore"
            if path.is_dir():
                def ignore(directory: str, names: list[str]) -> set[str]:
                    relative = Path(directory).relative_to(REPO_ROOT).as_posix()
                    return {n for n in names if ignored_by(patterns, f"{relative}/{n}")}

                shutil.copytree(path, target, ignore=ignore, dirs_exist_ok=True)  # a directory's contents, as COPY does
            else:
                destination = target / path.name if dest.endswith("/") or len(sources) > 1 else target
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)


def run_commands(image: Image) -> list[tuple[dict[str, str], list[str]]]:
    """The RUN lines' pip and python commands as (assignments, argv); the system commands are checked and dropped."""
    commands = []
    for run in image.runs:
        for part in run.split("&&"):
            tokens = shlex.split(part)
            assignments = {}
            while tokens and ASSIGNMENT.match(tokens[0]):
                name, _, value = tokens.pop(0).partition("=")
                assignments[name] = value
            assert tokens, f"empty command in RUN {run!r}"
            if tokens[0] in ("pip", "python"):
                commands.append((assignments, tokens))
            else:
                assert tokens[0] in SYSTEM_COMMANDS, f"RUN {part.strip()!r}: the local install does not know what this does"
    return commands


@dataclass
class ImageTree:
    """The image's WORKDIR as a directory here, installed into its own venv."""

    root: Path
    python: Path

    def argv(self, command: list[str]) -> list[str]:
        if command[0] == "pip":
            return [str(self.python), "-m", "pip", *[a for a in command[1:] if a != "--no-cache-dir"]]
        return [str(self.python), *command[1:]] if command[0] == "python" else command


def build_image_tree(image: Image, where: Path) -> ImageTree:
    root, venv = where / "app", where / "venv"
    root.mkdir(parents=True)
    copy_image_files(image, root)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    tree = ImageTree(root, venv / "bin" / "python")
    pure = os.environ.get("DRA_PURE_PYTHON", "") not in ("", "0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_")}
    env.update(image.env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    for assignments, command in run_commands(image):
        if pure and command[0] == "python" and "kube.compiled" in " ".join(command):
            continue  # the check that the modules were compiled
        step_env = {**env, **assignments, **({"DRA_PURE_PYTHON": "1"} if pure else {})}
        res = subprocess.run(tree.argv(command), cwd=root, env=step_env, capture_output=True, text=True, timeout=1200, check=False)
        assert res.returncode == 0, f"RUN {shlex.join(command)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return tree


# ------------------------------------------------------------ structural checks


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose(env={})  # defaults only, whatever the shell exports


@pytest.fixture(scope="module")
def image() -> Image:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_services_and_volume(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", *APP_SERVICES}
    pg = services["postgres"]
    assert pg["image"] == "postgres:16"
    assert set(environment_of(pg)) >= {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}
    volume, _, target = pg["volumes"][0].partition(":")
    assert volume in (compose.get("volumes") or {}), "postgres data must live in a named volume"
    assert target == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])


def test_one_image_for_every_process(compose: dict[str, Any], image: Image) -> None:
    services = compose["services"]
    images = {services[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1, f"every process should run the same image, got {images}"
    for name in APP_SERVICES:
        build = services[name]["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert (REPO_ROOT / context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")).resolve() == DOCKERFILE
    assert service_argv(services["pki"], image)[:3] == ["python", "-m", "devtools.credentials"]
    assert service_argv(services["migrate"], image)[:4] == ["python", "-m", "app", "migrate"]
    assert service_argv(services["apiserver"], image)[:4] == ["python", "-m", "app", "serve"]
    assert service_argv(services["grants"], image)[:3] == ["python", "-m", "devtools.grants"]
    assert service_argv(services["scheduler"], image)[:3] == ["python", "-m", "schedulers"]
    assert service_argv(services["controller"], image)[:3] == ["python", "-m", "controllers"]
    assert service_argv(services["kubeletsim"], image)[:3] == ["python", "-m", "kubeletsim"]


def test_dependency_conditions(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert depends_on(services["migrate"]) == {"postgres": "service_healthy"}
    assert depends_on(services["apiserver"]) == {"migrate": "service_completed_successfully", "pki": "service_completed_successfully"}
    assert depends_on(services["grants"]) == {"apiserver": "service_healthy"}
    for name in WORKERS:
        grants = {"grants": "service_completed_successfully"} if name == "scheduler" else {}
        assert depends_on(services[name]) == {"apiserver": "service_healthy", **grants}, name
    assert start_order(services).index("apiserver") > max(start_order(services).index("migrate"), start_order(services).index("pki"))
    for name, svc in services.items():
        for dep, condition in depends_on(svc).items():
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy but it has no healthcheck"


def test_restart_policies(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for job in ("migrate", "pki", "grants"):
        assert services[job].get("restart", "no") == "no", "a one-shot job must not be restarted"
    for name in ("postgres", "apiserver", *WORKERS):
        assert services[name].get("restart") in ("always", "unless-stopped", "on-failure"), name


def test_apiserver_published_and_healthchecked(compose: dict[str, Any]) -> None:
    api = compose["services"]["apiserver"]
    assert api["ports"] == ["127.0.0.1:6443:6443"]
    argv = service_argv(api, Image())
    assert argv[argv.index("--listen") + 1] == "0.0.0.0:6443"
    test = api["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python", "slim images have no curl: check with python"
    assert "/readyz" in " ".join(test)


def test_configuration_by_environment(compose: dict[str, Any]) -> None:
    services = compose["services"]
    envs = {name: environment_of(services[name]) for name in APP_SERVICES}
    assert {e.get("DRA_FEATURE_GATES") for e in envs.values()} == {""}, "feature gates default to empty, shared by all"
    gates = {environment_of(s).get("DRA_FEATURE_GATES") for s in load_compose({"DRA_FEATURE_GATES": gates_flag({Gate.DRAAdminAccess: True})})["services"].values()}
    assert gates == {None, gates_flag({Gate.DRAAdminAccess: True})}, "one DRA_FEATURE_GATES setting reaches every process"
    pg_env = environment_of(services["postgres"])
    for name in ("migrate", "apiserver"):
        url = urlsplit(envs[name]["DRA_DATABASE_URL"])
        assert url.scheme == "postgresql" and url.hostname == "postgres" and url.port == 5432
        assert (url.username, url.password, url.path) == (pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], "/" + pg_env["POSTGRES_DB"])
    for name in WORKERS:
        assert envs[name]["DRA_KUBECONFIG"] == f"data/pki/{name}.kubeconfig", "each worker has its own identity"
        assert "DRA_DATABASE_URL" not in envs[name], "workers talk to the API server only"
    assert envs["apiserver"]["DRA_AUTHORIZATION_MODE"] == "Node,RBAC"
    assert envs["apiserver"]["DRA_ALLOW_PRIVILEGED"] == "true", "drivers' kubelet plugins run privileged, as kube-up clusters allow"
    assert envs["apiserver"]["DRA_CLIENT_CA_FILE"] == "data/pki/ca.crt"
    pki = service_argv(services["pki"], Image())
    assert "--server=https://apiserver:6443" in pki and "--host=apiserver" in pki


def test_dockerfile(image: Image) -> None:
    assert image.base == "python:3.11-slim"
    assert image.user not in ("", "root", "0"), "run as a non-root user"
    assert "6443" in image.expose
    assert image.cmd == ["python", "-m", "app", "serve"]
    installs = [argv for _, argv in run_commands(image) if argv[:2] == ["pip", "install"]]
    assert installs and all("--no-cache-dir" in argv for argv in installs)
    assert not [argv for argv in installs if any("[test]" in a for a in argv)], "runtime dependencies only"
    compiled = [argv for argv in installs if "--no-build-isolation" in argv]
    assert compiled and compiled[-1][-2:] == ["-e", "."], "the hot modules are compiled in place (setup.py), as the Makefile does"
    ignored = {line.strip().rstrip("/") for line in dockerignore_patterns()}
    assert {".venv", ".git", "tests"} <= ignored
    for copy in image.copies:
        for src in copy[:-1]:
            assert (REPO_ROOT / src).exists(), f"COPY {src}: no such file"
            assert src.rstrip("/") not in ignored, f"COPY {src} is excluded by .dockerignore"


def test_image_holds_every_installed_package(image: Image) -> None:
    """The processes run from the copied tree, so every package pyproject.toml installs must be copied, and setup.py."""
    copied = {src.rstrip("/") for copy in image.copies for src in copy[:-1]}
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    packages = {pattern.rstrip("*") for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages - copied == set(), "packages the image lacks"
    assert {"pyproject.toml", "setup.py", "alembic.ini"} <= copied


def test_interpolation() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d} $SET $$SET ${SET:+a} ${UNSET:+a}", env) == "x d  d x $SET a "
    with pytest.raises(ValueError):
        interpolate("${UNSET:?needed}", env)


# ------------------------------------------------------------- running the stack


class LocalStack:
    """The compose services as local processes, with addresses rewritten for this host."""

    def __init__(self, compose: dict[str, Any], image: Image, tree: ImageTree, database_url: str, log_dir: Path) -> None:
        self.services: dict[str, Any] = compose["services"]
        self.image = image
        self.tree = tree
        self.database_url = database_url
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, str] = {}
        for svc in self.services.values():
            for spec in svc.get("ports") or []:
                self.ports.setdefault(str(spec).rsplit(":", 1)[-1], str(free_port()))
            for port in re.findall(r"//(?:127\.0\.0\.1|localhost):(\d+)", json.dumps(svc.get("healthcheck", {}))):
                self.ports.setdefault(port, str(free_port()))
        self.api_port = self.ports["6443"]

    def rewrite(self, value: str) -> str:
        """Service hostnames and 0.0.0.0 -> 127.0.0.1; container ports -> the free local ports."""
        hosts = "|".join(re.escape(h) for h in [*self.services, "0.0.0.0", "127.0.0.1", "localhost"])
        value = re.sub(rf"(?<![\w.-])(?:{hosts}):(\d+)\b", lambda m: f"127.0.0.1:{self.ports.get(m.group(1), m.group(1))}", value)
        flag, eq, arg = value.partition("=")
        if eq and flag.startswith("--") and arg in self.ports:  # --healthz-port=10248
            return f"{flag}={self.ports[arg]}"
        return self.ports.get(value, value)  # a bare port number (DRA_HEALTH_PORT, or a flag's separate value)

    def rewrite_database_url(self, value: str) -> str:
        """Keep the compose URL's scheme; take host, port, credentials and database from the throwaway server."""
        ours, target = urlsplit(value), urlsplit(self.database_url)
        assert ours.hostname == "postgres", value
        return urlunsplit((ours.scheme, target.netloc, target.path, target.query, ""))

    def env(self, name: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DRA_", "POSTGRES_", "KUBELETSIM_"))}
        env["PATH"] = f"{self.tree.python.parent}{os.pathsep}{env.get('PATH', '')}"
        env.update({k: self.rewrite(v) for k, v in self.image.env.items()})
        for key, value in environment_of(self.services[name]).items():
            env[key] = self.rewrite_database_url(value) if key == "DRA_DATABASE_URL" else self.rewrite(value)
        return env

    def local_argv(self, argv: list[str]) -> list[str]:
        return [str(self.tree.python) if i == 0 and a == "python" else self.rewrite(a) for i, a in enumerate(argv)]

    def argv(self, name: str) -> list[str]:
        return self.local_argv(service_argv(self.services[name], self.image))

    def log_tail(self, name: str, limit: int = 3000) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace")[-limit:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{self.log_tail(name)}" for name in self.services if (self.log_dir / f"{name}.log").exists())

    def start(self, name: str) -> subprocess.Popen[bytes]:
        with open(self.log_dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(self.argv(name), cwd=self.tree.root, env=self.env(name), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.processes[name] = proc
        return proc

    def run_to_completion(self, name: str, timeout: float) -> int:
        proc = self.start(name)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} did not finish within {timeout}s:\n{self.log_tail(name)}")

    def healthcheck_passes(self, name: str) -> bool:
        check = self.services[name]["healthcheck"]
        test = check["test"]
        if isinstance(test, str):
            argv = ["/bin/sh", "-c", test]
        elif test[0] == "CMD-SHELL":
            argv = ["/bin/sh", "-c", self.rewrite(test[1])]
        else:
            assert test[0] == "CMD", test
            argv = self.local_argv(test[1:])
        timeout = seconds(check.get("timeout"), 30.0)
        try:
            res = subprocess.run(argv, cwd=self.tree.root, env=self.env(name), capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return False
        return res.returncode == 0

    def wait_healthy(self, name: str, deadline: float) -> None:
        """Poll the service's own healthcheck command (faster than its interval) until it passes."""
        check = self.services[name]["healthcheck"]
        budget = seconds(check.get("start_period"), 0) + seconds(check.get("interval"), 30) * int(check.get("retries", 3))
        deadline = min(deadline, time.monotonic() + budget)
        while True:
            proc = self.processes[name]
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with code {proc.returncode} before it was healthy:\n{self.log_tail(name)}")
            if self.healthcheck_passes(name):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"{name} never passed its healthcheck:\n{self.log_tail(name)}")
            time.sleep(0.25)

    def stop(self) -> None:
        for proc in reversed(list(self.processes.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    try:
        with database_url_for_tests() as url:
            yield url
    except PostgresNotAvailable as exc:
        if os.environ.get("DRA_REQUIRE_POSTGRES"):
            pytest.fail(f"Postgres is required here but not available: {exc}")
        pytest.skip(f"no Postgres available: {exc}")


def _api_path(obj: Mapping[str, Any]) -> str:
    plural, namespaced = PLURALS[obj["kind"]]
    group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    if namespaced:
        return f"{group}/namespaces/{obj['metadata'].get('namespace', 'default')}/{plural}"
    return f"{group}/{plural}"


def apply_examples(client: httpx.Client, paths: tuple[Path, ...]) -> list[str]:
    """POST every object of ``paths`` (Namespaces, then DeviceClasses first); returns 'Kind/name' for each."""
    docs = [d for path in paths for d in yaml.safe_load_all(path.read_text()) if d]
    docs.sort(key=lambda d: {"Namespace": 0, "DeviceClass": 1}.get(d["kind"], 2))
    created = []
    for obj in docs:
        resp = client.post(_api_path(obj), json=obj)
        assert resp.status_code == 201, f"{obj['kind']}/{obj['metadata']['name']}: {resp.status_code} {resp.text}"
        created.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return created


def _pod_running_with_allocated_claim(client: httpx.Client) -> dict[str, Any] | None:
    pod = client.get("/api/v1/namespaces/default/pods/gpu-pod").json()
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    statuses = pod["status"].get("resourceClaimStatuses") or []
    names = [s.get("resourceClaimName") for s in statuses if s.get("name") == "gpu"]
    if not names or not names[0]:
        return None
    claim = client.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{names[0]}").json()
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return None
    return {"pod": pod, "claim": claim}


@pytest.fixture(scope="module")
def image_tree(image: Image, tmp_path_factory: pytest.TempPathFactory) -> ImageTree:
    return build_image_tree(image, tmp_path_factory.mktemp("image"))


@pytest.mark.slow
@pytest.mark.image
@pytest.mark.postgres
@pytest.mark.timeout(2400)  # the image's install included: mypyc takes 10-20 minutes on a busy 2-core machine
def test_stack_runs_as_composed(database_url: str, image: Image, image_tree: ImageTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The credentials go to this test's directory rather than the image's data/pki.
    monkeypatch.setenv("DRA_PKI_DIR", str(tmp_path / "pki"))
    compose = load_compose()  # interpolated from this environment, as `docker compose up` would be
    stack = LocalStack(compose, image, image_tree, database_url, tmp_path)
    started = time.monotonic()
    deadline = started + E2E_TIMEOUT
    one_shot = {dep for svc in compose["services"].values() for dep, cond in depends_on(svc).items() if cond == "service_completed_successfully"}
    try:
        for name in start_order(compose["services"]):
            if name == "postgres":
                # Stand-in: the throwaway server. Its healthcheck (pg_isready) runs too, pointed at it by PG* variables.
                bin_dir = find_postgres_bin()
                test = compose["services"]["postgres"]["healthcheck"]["test"]
                if bin_dir is not None and test[0] == "CMD" and test[1] == "pg_isready":
                    target = urlsplit(database_url)
                    pg_env = {**os.environ, "PGHOST": target.hostname or "", "PGPORT": str(target.port or 5432)}
                    res = subprocess.run([str(bin_dir / "pg_isready"), *test[2:]], env=pg_env, capture_output=True, timeout=30, check=False)
                    assert res.returncode == 0, res.stdout + res.stderr
                continue
            if name in one_shot:
                code = stack.run_to_completion(name, timeout=max(1.0, deadline - time.monotonic()))
                assert code == 0, f"{name} exited with {code}:\n{stack.log_tail(name)}"
                continue
            stack.start(name)
            if "healthcheck" in compose["services"][name]:
                stack.wait_healthy(name, deadline)

        admin = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        admin.load_cert_chain(tmp_path / "pki" / "admin.crt", tmp_path / "pki" / "admin.key")
        with httpx.Client(base_url=f"https://127.0.0.1:{stack.api_port}", verify=admin, timeout=10) as client:
            created = apply_examples(client, COMPOSE_EXAMPLE)
            assert "Pod/gpu-pod" in created and "DeviceClass/gpu.example.com" in created
            result = None
            while result is None:
                for name, proc in stack.processes.items():
                    if name not in one_shot:
                        assert proc.poll() is None, f"{name} exited with {proc.returncode}:\n{stack.log_tail(name)}"
                result = _pod_running_with_allocated_claim(client)
                if result is None:
                    assert time.monotonic() < deadline, f"gpu-pod not Running with an allocated claim after {E2E_TIMEOUT}s:\n{stack.logs()}"
                    time.sleep(0.25)
        claim = result["claim"]
        pod = result["pod"]
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert any(r.get("name") == "gpu-pod" for r in claim["status"].get("reservedFor") or [])
        assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == "gpu.example.com"
        assert pod["spec"]["nodeName"].startswith("sim-")
        # kubectl dra, as a user runs it on the host with the kubeconfig the pki job wrote for outside the containers.
        why = subprocess.run(
            [str(image_tree.python.parent / "kubectl-dra"), "--kubeconfig", str(tmp_path / "pki" / "outside-admin.kubeconfig"), "why", "pod/gpu-pod"],
            cwd=tmp_path, env=stack.env("kubeletsim"), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert (why.returncode, why.stderr) == (0, "")
        assert why.stdout == f"Pod default/gpu-pod: Bound\n  the pod is bound to node {pod['spec']['nodeName']}\n"
    finally:
        stack.stop()
        print(f"stack logs in {tmp_path}; up to gpu-pod Running in {time.monotonic() - started:.1f}s")
