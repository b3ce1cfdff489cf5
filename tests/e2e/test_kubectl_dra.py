"""``kubectl dra`` as a user runs it: the real kubectl finds the plugin on PATH and the plugin talks
to the whole stack (HTTPS, Node,RBAC, the scheduler's explanation port) with the kubeconfig's user."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.ports import free_port
from devtools.server import REPO_ROOT
from kube.kubeconfig import kubeconfig_text
from kube.pki import Authority, cert_pem, key_pem
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow]

KUBECTL = Path(sys.executable).parent / "kubectl"
GPU = "gpu.example.com"


def plugin_bin(directory: Path) -> Path:
    """A ``kubectl-dra`` executable made from pyproject's console script, as pip makes it."""
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["kubectl-dra"].split(":")
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "kubectl-dra"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\nfrom {module} import {function}\nsys.exit({function}())\n")
    script.chmod(0o755)
    return directory


def pod(name: str, template: str = "", namespace: str = "default", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], **spec}
    if template:
        body["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def template(name: str, count: int = 1, selector: str = "", device_class: str = GPU) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Two nodes of 8 GPUs, all taken by four running pods; pods that wait for different reasons,
    and one placed on sim-0 whose claim is not allocated, so the kubelet cannot prepare it."""
    with running_stack(tmp_path_factory.mktemp("kubectl-dra")) as stack, stack.admin() as admin:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class).status_code == 201
        templates = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
        for body in (template("four", 4), template("big", 1, f'device.capacity["{GPU}"].memory.compareTo(quantity("160Gi")) >= 0'),
                     template("classless", 1, device_class="no-such-class"), template("faulty", 1, f'device.attributes["{GPU}"].missing == 1')):  # fmt: skip
            assert admin.post(templates, json=body).status_code == 201, body
        pods = "/api/v1/namespaces/default/pods"
        for i in range(4):
            assert admin.post(pods, json=pod(f"train-{i}", "four")).status_code == 201
        eventually(lambda: sum(1 for p in admin.get(pods).json()["items"] if p["spec"].get("nodeName")) == 4, "the four trainers run", timeout=60)
        for body in (pod("one-more", "four"), pod("big", "big"), pod("classless", "classless"), pod("faulty", "faulty"),
                     pod("nowhere", nodeSelector={"zone": "moon"}),
                     {**pod("missing-claim"), "spec": {**pod("missing-claim")["spec"], "resourceClaims": [{"name": "gpu", "resourceClaimName": "does-not-exist"}]}}):  # fmt: skip
            assert admin.post(pods, json=body).status_code == 201, body

        def tried() -> bool:
            items = {p["metadata"]["name"]: p for p in admin.get(pods).json()["items"]}
            return all(any(c["type"] == "PodScheduled" for c in (items[n].get("status") or {}).get("conditions") or []) for n in ("one-more", "big", "nowhere"))

        eventually(tried, "the scheduler tried the waiting pods", timeout=30)
        never = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "never"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", json=never).status_code == 201
        stuck = pod("stuck", nodeName="sim-0", resourceClaims=[{"name": "gpu", "resourceClaimName": "never"}])
        assert admin.post(pods, json=stuck).status_code == 201
        yield stack


def environment(stack: Stack, env: dict[str, str] | None = None, tmp: Path | None = None) -> dict[str, str]:
    bin_dir = plugin_bin((tmp or stack.tmp) / "plugin-bin")
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "KUBECONFIG": str(stack.admin_kubeconfig), **(env or {})}
    environment.pop("KUBECTL_DRA_SCHEDULER_URL", None)
    return environment


def kubectl(stack: Stack, *args: str, env: dict[str, str] | None = None, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "dra", *args], capture_output=True, text=True, env=environment(stack, env, tmp), timeout=60)


def test_why_explains_taken_devices_on_every_node(stack: Stack) -> None:
    run = kubectl(stack, "why", "pod/one-more")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Pod default/one-more: Unschedulable"
    assert "  2 nodes (sim-0, sim-1):" in lines
    assert any(line.endswith(f"request gpu: every {GPU} device is taken") for line in lines), run.stdout
    assert any("gpu-0, gpu-1, gpu-2 (+1 more) by default/train-" in line and "(pod train-" in line for line in lines), run.stdout
    # Both nodes have a gpu-0: each node's holders are named, under the node's name.
    with stack.admin() as admin:
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in admin.get("/api/v1/namespaces/default/pods").json()["items"]}
    for node in ("sim-0", "sim-1"):
        (held,) = [line for line in lines if line.startswith(f"        {node}: gpu-")]
        assert set(re.findall(r"\(pod (train-\d)\)", held)) == {p for p, n in placed.items() if p.startswith("train-") and n == node}, run.stdout
    (timing,) = [line for line in lines if line.startswith("Nodes: ")]
    assert re.fullmatch(r"Nodes: 0 of 2 fit, 2 examined in (\d+ms|under 1ms|\d\.\d+s)", timing), timing
    document = json.loads(kubectl(stack, "why", "one-more", "-o", "json").stdout)
    assert document["kind"] == "PodExplanation" and document["state"] == "Unschedulable"
    assert document["nodes"] == {"total": 2, "examined": 2, "fit": 0}
    assert [r["kind"] for r in document["groups"][0]["reasons"]] == ["DevicesTaken"]
    assert yaml.safe_load(kubectl(stack, "why", "pod/one-more", "-o", "yaml").stdout)["pod"] == "default/one-more"


def test_why_shows_the_selector_and_the_values_that_make_it_false(stack: Stack) -> None:
    run = kubectl(stack, "why", "pod/big")
    assert run.returncode == 0, run.stderr
    assert f'selector `device.capacity["{GPU}"].memory.compareTo(quantity("160Gi")) >= 0` is false' in run.stdout
    assert "8 devices (gpu-0, gpu-1, gpu-2 (+5 more)) with memory=80Gi" in run.stdout


def test_devices_table_and_filters(stack: Stack) -> None:
    run = kubectl(stack, "devices", "--node", "sim-0", "--driver", GPU)
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split() == ["NODE", "DRIVER", "POOL", "DEVICE", "STATE", "ATTRIBUTES", "CAPACITY", "ALLOCATED-TO", "TAINTS", "HEALTH"]
    assert [r.split()[3] for r in rows] == [f"gpu-{i}" for i in range(8)]
    assert all(r.split()[4] == "allocated" and "memory=80Gi/80Gi" in r for r in rows)
    items = json.loads(kubectl(stack, "devices", "-o", "json").stdout)["items"]
    assert len(items) == 16 and {i["node"] for i in items} == {"sim-0", "sim-1"}
    assert all(i["claims"] and i["pods"][0].startswith("default/train-") for i in items)
    assert kubectl(stack, "devices", "--node", "sim-9").stderr == "No devices found.\n"


def test_claims_table(stack: Stack) -> None:
    run = kubectl(stack, "claims")
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split() == ["NAME", "STATE", "DEVICES", "RESERVED-FOR", "NODE", "AGE"]
    states = {r.split()[0].rsplit("-", 2)[0]: r.split()[1] for r in rows}
    assert states["train-0"] == "allocated,reserved" and states["one-more"] == "pending"
    (train,) = [r.split() for r in rows if r.startswith("train-0-")]
    assert re.fullmatch(rf"{GPU}/sim-\d/gpu-\d(,{GPU}/sim-\d/gpu-\d){{3}}", train[2]), train  # driver/pool/device, as two drivers may both have a gpu-0
    everywhere = kubectl(stack, "claims", "-A", "-o", "yaml")
    assert {i["namespace"] for i in yaml.safe_load(everywhere.stdout)["items"]} == {"default"}
    assert kubectl(stack, "claims", "-n", "kube-system").stderr == "No resources found in kube-system namespace.\n"


def test_why_shows_what_the_kubelet_says_of_a_placed_pod_it_cannot_start(stack: Stack) -> None:
    """Bound, but NodePrepareResources failed: the kubelet's FailedPrepareDynamicResources event."""
    with stack.admin() as admin:

        def kubelet_said() -> list[dict[str, Any]]:
            items = admin.get("/api/v1/namespaces/default/events").json()["items"]
            return [e for e in items if e["involvedObject"]["name"] == "stuck" and e["reason"] == "FailedPrepareDynamicResources"]

        (event,) = eventually(kubelet_said, "the kubelet's event", timeout=30)
    run = kubectl(stack, "why", "pod/stuck")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Pod default/stuck: Bound", "  the pod is bound to node sim-0"], run.stdout
    assert re.fullmatch(r"  The kubelet on sim-0 cannot start it: FailedPrepareDynamicResources \(once, last \d+s ago\):", lines[2]), run.stdout
    assert lines[3] == f"    {event['message']}" and "never" in event["message"]
    document = json.loads(kubectl(stack, "why", "pod/stuck", "-o", "json").stdout)
    assert [(e["type"], e["reason"], e["message"], e["count"]) for e in document["kubeletEvents"]] == [
        ("Warning", "FailedPrepareDynamicResources", event["message"], 1)
    ]
    running = kubectl(stack, "why", "pod/train-0")
    assert "kubelet" not in running.stdout


def with_reader_gone(stack: Stack, *args: str) -> tuple[int, str]:
    """kubectl's exit status and stderr when its output's reader has gone away (``| head -1``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run([str(KUBECTL), *args], stdout=write, stderr=subprocess.PIPE, text=True, env=environment(stack), timeout=60)
    finally:
        os.close(write)
    return run.returncode, run.stderr


def test_a_reader_that_goes_away_ends_the_plugin_as_it_ends_kubectl(stack: Stack) -> None:
    kubectls = with_reader_gone(stack, "get", "resourceslices")
    assert kubectls == (-signal.SIGPIPE, "")  # killed by SIGPIPE (the shell's 141), saying nothing
    for args in (("devices",), ("claims", "-o", "yaml"), ("why", "pod/one-more"), ("--help",)):
        assert with_reader_gone(stack, "dra", *args) == kubectls, args


# --- bad input -------------------------------------------------------------------------------------


def test_pod_that_does_not_exist(stack: Stack) -> None:
    run = kubectl(stack, "why", "pod/nope")
    assert (run.returncode, run.stdout, run.stderr) == (1, "", 'Error from server (NotFound): pods "nope" not found\n')


def test_bound_pod_pod_without_claims_missing_claim_and_class_bad_cel(stack: Stack) -> None:
    bound = kubectl(stack, "why", "pod/train-0")
    assert bound.returncode == 0 and bound.stdout.startswith("Pod default/train-0: Bound\n  the pod is bound to node sim-")
    nowhere = kubectl(stack, "why", "pod/nowhere")
    assert "Note: the pod has no resource claims; only node filters apply" in nowhere.stdout
    assert "node(s) didn't match Pod's node affinity/selector" in nowhere.stdout and "nodeSelector zone=moon: the node has no such label" in nowhere.stdout
    missing = kubectl(stack, "why", "pod/missing-claim")
    assert missing.stdout.splitlines()[:2] == ["Pod default/missing-claim: WaitingForClaims", "  waiting for resourceclaim 'does-not-exist' to be created"]
    classless = kubectl(stack, "why", "pod/classless", "-o", "json")
    document = json.loads(classless.stdout)
    # The scheduler's PreFilter (upstream's DynamicResources): unschedulable until the class exists.
    assert (document["state"], document["message"]) == ("Unschedulable", "request gpu: device class no-such-class does not exist")
    faulty = json.loads(kubectl(stack, "why", "pod/faulty", "-o", "json").stdout)
    # Its selector fails on every GPU, but every GPU is in use: the scheduler, as kube-scheduler,
    # asks no selector of a device in use, so the pod waits for a device, not for a fixed claim
    # (a free device makes it an Error: tests/schedulers/test_explain.py).
    assert faulty["state"] == "Unschedulable" and "every gpu.example.com device is taken" in faulty["message"], faulty


def test_kubectl_conventions(stack: Stack, tmp_path: Path) -> None:
    assert kubectl(stack, "why", "deployment/x").stderr == 'error: kubectl dra why explains pods: use pod/NAME, not "deployment/x"\n'
    unknown = kubectl(stack, "devices", "--frobnicate")
    assert (unknown.returncode, unknown.stderr) == (1, "error: unknown flag: --frobnicate\nSee 'kubectl dra devices --help' for usage.\n")
    unknown_command = kubectl(stack, "frobnicate")
    assert (unknown_command.returncode, unknown_command.stderr) == (1, 'error: unknown command "frobnicate" for "kubectl dra"\nRun \'kubectl dra --help\' for usage.\n')
    wide = kubectl(stack, "devices", "-o", "wide")
    assert (wide.returncode, wide.stdout, wide.stderr) == (1, "", 'error: unable to match a printer suitable for the output format "wide", allowed formats are: json,yaml\n')
    bare = kubectl(stack)
    assert bare.returncode == 0 and bare.stdout.startswith("usage: kubectl dra") and "why" in bare.stdout, bare.stderr
    no_context = kubectl(stack, "claims", "--context", "nope")
    assert (no_context.returncode, no_context.stderr) == (1, 'error: context "nope" does not exist\n')
    # KUBECONFIG lists files (missing ones are skipped); the first file that sets a name wins.
    other = tmp_path / "other.kubeconfig"
    other.write_text(yaml.safe_dump({**yaml.safe_load(stack.admin_kubeconfig.read_text()), "current-context": "dra"}))
    listed = kubectl(stack, "claims", "-o", "json", env={"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(other)])})
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"]
    explicit = kubectl(stack, "claims", "--kubeconfig", str(other), env={"KUBECONFIG": str(tmp_path / "missing")})
    assert explicit.returncode == 0
    nothing = kubectl(stack, "claims", env={"KUBECONFIG": str(tmp_path / "missing")})
    assert (nothing.returncode, nothing.stderr) == (1, "error: Missing or incomplete configuration info. Please point to an existing, complete config file\n")
    port = free_port()
    down = tmp_path / "down.kubeconfig"
    down.write_text(kubeconfig_text(f"https://127.0.0.1:{port}", stack.credentials.ca_cert.read_bytes(), token="x"))
    refused = kubectl(stack, "devices", env={"KUBECONFIG": str(down)})
    assert (refused.returncode, refused.stderr) == (1, f"The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?\n")


def test_explanations_need_the_callers_own_permission(stack: Stack, tmp_path: Path) -> None:
    """No side door: the scheduler asks the API server about each caller, whatever the credential."""
    url = f"https://127.0.0.1:{stack.explain_port}/explain/namespaces/default/pods/one-more"
    trust = stack.credentials.ca_cert
    authority = Authority.load(trust, stack.credentials.directory / "ca.key")
    cert, key = authority.client("alice", ())
    (tmp_path / "alice.crt").write_bytes(cert_pem(cert))
    (tmp_path / "alice.key").write_bytes(key_pem(key))
    import ssl

    context = ssl.create_default_context(cafile=str(trust))
    context.load_cert_chain(tmp_path / "alice.crt", tmp_path / "alice.key")
    refused = httpx.get(url, verify=context)
    assert refused.status_code == 403
    assert refused.json()["message"].startswith('pods "one-more" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "default"')
    node_token = stack.credentials.token("system:node:sim-0")
    as_node = httpx.get(url, verify=ssl.create_default_context(cafile=str(trust)), headers={"Authorization": f"Bearer {node_token}"})
    assert as_node.status_code == 403 and 'User "system:node:sim-0"' in as_node.json()["message"]
    bad_token = httpx.get(url, verify=ssl.create_default_context(cafile=str(trust)), headers={"Authorization": "Bearer not-a-token"})
    assert bad_token.status_code == 401
    anonymous = httpx.get(url, verify=ssl.create_default_context(cafile=str(trust)))
    assert anonymous.status_code == 403 and 'User "system:anonymous"' in anonymous.json()["message"]
    with stack.admin() as admin:
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "default"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}  # fmt: skip
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "alice-reads", "namespace": "default"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}  # fmt: skip
        assert admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", json=role).status_code == 201
        assert admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json=binding).status_code == 201
    # The stack's scheduler remembers a denial for 1 s (--authorization-webhook-cache-unauthorized-ttl;
    # by default 10 s, which this wait would not outlast).
    allowed = eventually(lambda: (r := httpx.get(url, verify=context)).status_code == 200 and r, "alice may now", timeout=8)
    assert allowed.json()["state"] == "Unschedulable"


def banner(process: subprocess.Popen[str], timeout: float = 90) -> list[str]:
    """What ``make run`` (devtools.devstack) prints up to "Press Ctrl-C to stop."."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in process.stdout or ():
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    printed: list[str] = []
    deadline = time.monotonic() + timeout
    while not printed or printed[-1] != "Press Ctrl-C to stop.":
        try:
            printed.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"no banner in {timeout:g}s: {printed}") from None
    return printed


def test_following_make_runs_banner_kubectl_dra_works(tmp_path: Path) -> None:
    """A shell whose kubectl is a system one, without the venv on PATH: the banner's commands,
    as printed, make ``kubectl dra`` work (without them: kubectl's unknown command "dra")."""
    system = tmp_path / "system-bin"
    system.mkdir()
    (system / "kubectl").symlink_to(KUBECTL)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DRA_", "KUBECTL_DRA_"))}, "PATH": f"{system}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    env.pop("KUBECONFIG", None)
    root = Path(tempfile.mkdtemp(prefix="ds-", dir="/tmp"))  # make run's data/ and .kube-dra/ (short: unix socket paths are limited)
    start = f"import sys, pathlib, devtools.devstack as d; d.REPO_ROOT = pathlib.Path({str(root)!r}); sys.exit(d.main(sys.argv[1:]))"
    flags = ["--port", str(free_port()), "--explain-port", str(free_port()), "--database-url", f"sqlite:///{root / 'dra.sqlite'}"]
    process = subprocess.Popen(
        [sys.executable, "-c", start, *flags], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )  # fmt: skip
    try:
        exports = [line.strip() for line in banner(process) if line.startswith("    export ")]
        assert [e.split("=", 1)[0] for e in exports] == ["export KUBECONFIG", "export PATH"], exports

        def shell(script: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=root, timeout=60)

        without = shell(f"{exports[0]}; kubectl dra devices")
        assert (without.returncode, without.stderr.splitlines()[0]) == (1, 'error: unknown command "dra" for "kubectl"'), without.stderr
        following = shell("; ".join([*exports, "kubectl dra claims -A"]))
        assert (following.returncode, following.stderr) == (0, "No resources found.\n"), following.stderr
    finally:
        process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        with contextlib.suppress(ProcessLookupError):  # what it started, should Ctrl-C come before it listens for it
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        shutil.rmtree(root, ignore_errors=True)


def test_the_dashboard_stops_at_once_with_pages_open(stack: Stack) -> None:
    """SIGTERM (Ctrl-C) ends the dashboard while a page's event stream is open, by itself and promptly
    (it waited for the stream forever, until whoever stopped it killed it)."""
    from tests.kubectl_dra.test_dashboard_browser import Dashboard

    dashboard = Dashboard(stack, free_port()).start()
    opened = threading.Event()

    def listen() -> None:
        with contextlib.suppress(httpx.HTTPError), httpx.stream("GET", dashboard.url + "api/events", timeout=30) as response:
            opened.set()
            for _ in response.iter_bytes():
                pass

    threading.Thread(target=listen, daemon=True).start()
    try:
        assert opened.wait(10)
        assert dashboard.process is not None
        started = time.monotonic()
        dashboard.process.send_signal(signal.SIGINT)
        code = dashboard.process.wait(15)
        assert code != -signal.SIGKILL and time.monotonic() - started < 6
    finally:
        dashboard.stop(kill=True)
