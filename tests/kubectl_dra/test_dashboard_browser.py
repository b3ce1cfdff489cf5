"""The dashboard in a real headless Chromium against the whole stack: the map shows a known
scenario's devices in the right states, changes show within a second, a pending pod's
explanation is shown, and the page says what is wrong when the API server or the dashboard
server goes away, and recovers by itself. A screenshot is kept in build/test-artifacts/."""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.ports import free_port
from devtools.server import REPO_ROOT, stop_process
from tests.browser import artifact, chromium, needs_chromium
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow, needs_chromium]

GPU = "gpu.example.com"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
PODS = "/api/v1/namespaces/default/pods"


class Dashboard:
    """``kubectl dra dashboard`` as a process of its own, as the cluster admin."""

    def __init__(self, stack: Stack, port: int, *flags: str) -> None:
        self.stack = stack
        self.port = port
        self.flags = list(flags)
        self.url = f"http://127.0.0.1:{port}/"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Dashboard:
        with open(self.stack.tmp / "dashboard.log", "ab") as log:
            command = [sys.executable, "-m", "kubectl_dra", "--kubeconfig", str(self.stack.admin_kubeconfig), "dashboard", "--port", str(self.port), *self.flags]
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log)
        eventually(lambda: self._answers(), "the dashboard answers", timeout=30)
        return self

    def _answers(self) -> bool:
        try:
            return httpx.get(self.url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, kill: bool = False) -> None:
        stop_process(self.process, kill)


def claim(name: str, count: int = 1, device_class: str = GPU) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": device_class, "count": count}}]}}}  # fmt: skip


def allocate(admin: httpx.Client, name: str, results: list[dict[str, Any]]) -> None:
    """Write a claim's allocation as the scheduler would (the admin may), reserved for the pod
    "watcher" (the claim controller releases allocations nobody reserves)."""
    current = admin.get(f"{CLAIMS}/{name}").json()
    watcher = admin.get(f"{PODS}/watcher").json()["metadata"]
    current["status"] = {"allocation": {"devices": {"results": results}}, "reservedFor": [{"resource": "pods", "name": "watcher", "uid": watcher["uid"]}]}
    response = admin.put(f"{CLAIMS}/{name}/status", json=current)
    assert response.status_code == 200, response.text


def pod(name: str, template: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], **spec}
    if template:
        body["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
        body["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, dict[str, str]]]:
    """Two nodes of 8 GPUs: two pods hold 4 each; one GPU tainted by a rule, one reported unhealthy;
    a fabric pool for all nodes with one device shared 40%; a pod waiting for 160Gi GPUs and one
    for 9 GPUs (more than a node has).
    Yields the stack and the state every device should show."""
    with running_stack(tmp_path_factory.mktemp("dashboard")) as stack, stack.admin() as admin:
        for body in (
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fabric"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fabric.example.com"'}}]}},
        ):  # fmt: skip
            assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=body).status_code == 201
        templates = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
        for name, exactly in (("four", {"deviceClassName": GPU, "count": 4}), ("nine", {"deviceClassName": GPU, "count": 9}),
                              ("big", {"deviceClassName": GPU, "selectors": [{"cel": {"expression": f'device.capacity["{GPU}"].memory.compareTo(quantity("160Gi")) >= 0'}}]})):  # fmt: skip
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}  # fmt: skip
            assert admin.post(templates, json=body).status_code == 201
        for i in range(2):
            assert admin.post(PODS, json=pod(f"train-{i}", "four")).status_code == 201
        eventually(lambda: sum(1 for p in admin.get(PODS).json()["items"] if p["spec"].get("nodeName")) == 2, "the trainers are placed", timeout=60)
        expected: dict[str, str] = {}
        for s in admin.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]:
            for d in s["spec"]["devices"]:
                expected[f"{s['spec']['driver']}/{s['spec']['pool']['name']}/{d['name']}"] = "free"
        for c in admin.get(CLAIMS).json()["items"]:
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
                expected[f"{r['driver']}/{r['pool']}/{r['device']}"] = "allocated"
        free = sorted((k for k, v in expected.items() if v == "free"), key=lambda k: (k.rsplit("/", 2)[1], int(k.rsplit("-", 1)[1])))
        tainted, unhealthy = free[-1], free[-2]
        driver, pool, device = tainted.split("/")
        rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "maintenance"},
                "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device}, "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/devicetaintrules", json=rule).status_code == 201
        expected[tainted] = "tainted"
        # A kubelet's report that a device is unhealthy, on a pod of a node without a kubelet (nothing overwrites it).
        assert admin.post(PODS, json=pod("watcher", nodeName="ghost")).status_code == 201
        watcher = admin.get(f"{PODS}/watcher").json()
        watcher["status"] = {**watcher.get("status", {}), "phase": "Running", "containerStatuses": [{
            "name": "c", "image": "x", "imageID": "", "ready": True, "restartCount": 0, "state": {"running": {}},
            "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [{"resourceID": unhealthy, "health": "Unhealthy"}]}],
        }]}  # fmt: skip
        answer = admin.put(f"{PODS}/watcher/status", json=watcher)
        assert answer.status_code == 200, answer.text
        expected[unhealthy] = "unhealthy"
        fabric = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
                  "spec": {"driver": "fabric.example.com", "allNodes": True, "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                           "devices": [{"name": f"link-{i}", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "100"}}} for i in range(2)]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/resourceslices", json=fabric).status_code == 201, admin.post("/apis/resource.k8s.io/v1/resourceslices", json=fabric).text
        assert admin.post(CLAIMS, json=claim("share", device_class="fabric")).status_code == 201
        allocate(admin, "share", [{"request": "r", "driver": "fabric.example.com", "pool": "fabric", "device": "link-0", "shareID": str(uuid.uuid4()),
                                   "consumedCapacity": {"bandwidth": "40"}}])  # fmt: skip
        expected["fabric.example.com/fabric/link-0"] = "shared"
        expected["fabric.example.com/fabric/link-1"] = "free"
        assert admin.post(PODS, json=pod("big", "big")).status_code == 201
        assert admin.post(PODS, json=pod("nine", "nine")).status_code == 201
        yield stack, expected


@pytest.fixture(scope="module")
def dashboard(scenario: tuple[Stack, dict[str, str]]) -> Iterator[Dashboard]:
    running = Dashboard(scenario[0], free_port()).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module: playwright's sync API runs one at a time."""
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def page(browser: Any, dashboard: Dashboard) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(dashboard.url)
    page.wait_for_selector(".cell")
    yield page
    page.close()


def states_on_page(page: Any) -> dict[str, str]:
    return dict(page.eval_on_selector_all(".cell[data-id]", "cells => cells.map(c => [c.dataset.id, c.dataset.state])"))


def test_the_map_shows_each_device_in_its_state(page: Any, scenario: tuple[Stack, dict[str, str]]) -> None:
    _, expected = scenario
    try:
        eventually(lambda: states_on_page(page) == expected, "the map matches the scenario", timeout=10)
    finally:
        page.screenshot(path=str(artifact("dashboard-map.png")))
    assert states_on_page(page) == expected
    rows = page.eval_on_selector_all(".row", "rows => rows.map(r => r.dataset.node)")
    assert rows == ["sim-0", "sim-1", "<all nodes: fabric>"]
    shared = page.get_attribute('[data-id="fabric.example.com/fabric/link-0"]', "style")
    assert shared == "--u:40%"
    counts = {s: int(page.text_content(f'[data-count="{s}"]')) for s in ("free", "shared", "allocated", "tainted", "unhealthy")}
    assert counts == {"free": 7, "shared": 1, "allocated": 8, "tainted": 1, "unhealthy": 1}
    # Hover and click: the device's details.
    tainted = next(k for k, v in expected.items() if v == "tainted")
    page.hover(f'[data-id="{tainted}"]')
    assert "tainted" in page.text_content("#tip")
    page.click(f'[data-id="{tainted}"]')
    page.wait_for_selector(".device-title")
    details = page.text_content("#details")
    assert "example.com/maintenance:NoSchedule" in details and "capacity memory0/80Gi" in details


def test_the_map_shows_drivers_and_device_names(page: Any, scenario: tuple[Stack, dict[str, str]]) -> None:
    """Not only on hover: each node's devices under their driver's name, each with its name."""
    _, expected = scenario
    drivers = page.eval_on_selector_all(".row", "rows => rows.map(r => [r.dataset.node, [...r.querySelectorAll('.driver-name')].map(d => d.innerText)])")
    assert drivers == [["sim-0", [GPU]], ["sim-1", [GPU]], ["<all nodes: fabric>", ["fabric.example.com"]]]
    names = dict(page.eval_on_selector_all(".cell[data-id]", "cells => cells.map(c => [c.dataset.id, c.innerText])"))
    assert names == {key: key.rsplit("/", 1)[1] for key in expected}
    fabric = page.eval_on_selector('[data-driver="fabric.example.com"]', "group => group.innerText")
    assert fabric.split() == ["fabric.example.com", "link-0", "link-1"]


def test_the_header_names_the_user(page: Any, scenario: tuple[Stack, dict[str, str]], dashboard: Dashboard) -> None:
    stack, _ = scenario
    page.wait_for_function("document.getElementById('who').textContent !== ''", timeout=10000)
    assert page.text_content("#who") == f"as kubernetes-admin on {stack.server.url}"
    banner = (stack.tmp / "dashboard.log").read_text().splitlines()[0]
    assert banner == f"Serving the dashboard on {dashboard.url} as kubernetes-admin (Ctrl-C stops it)"


def test_changes_show_within_a_second(page: Any, scenario: tuple[Stack, dict[str, str]]) -> None:
    stack, expected = scenario
    target = next(k for k, v in expected.items() if v == "free" and k.startswith(GPU))
    driver, pool, device = target.split("/")
    with stack.admin() as admin:
        assert admin.post(CLAIMS, json=claim("quick")).status_code == 201
        allocate(admin, "quick", [{"request": "r", "driver": driver, "pool": pool, "device": device}])
        written = time.monotonic()
        page.wait_for_selector(f'[data-id="{target}"][data-state="allocated"]', timeout=5000)
        assert time.monotonic() - written < 1.0
        assert admin.post(PODS, json=pod("arrives", nodeSelector={"zone": "moon"})).status_code == 201
        created = time.monotonic()
        page.wait_for_selector('[data-pod="default/arrives"]', state="attached", timeout=5000)
        assert time.monotonic() - created < 1.0


def test_a_pending_pods_explanation_is_shown(page: Any) -> None:
    page.click('.tabs button[data-tab="pending"]')
    page.click('[data-pod="default/big"]')
    page.wait_for_selector('.explanation [data-kind="SelectorFalse"]', timeout=10000)
    text = page.text_content(".explanation")
    assert "Unschedulable" in text
    assert f'selector `device.capacity["{GPU}"].memory.compareTo(quantity("160Gi")) >= 0` is false' in text
    assert "with memory=80Gi" in text
    shot = artifact("dashboard.png")
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_the_devices_that_keep_a_pending_pod_out_are_marked(page: Any) -> None:
    """Nine GPUs wanted, a node has eight: the taken and the tainted ones are marked on the map."""
    page.click('.tabs button[data-tab="pending"]')
    page.click('[data-pod="default/nine"]')
    page.wait_for_selector("#map .cell.blocking", timeout=10000)
    keeping = {key for key, state in states_on_page(page).items() if key.startswith(GPU) and state in ("allocated", "tainted")}
    assert len(keeping) >= 9
    eventually(lambda: set(page.eval_on_selector_all("#map .cell.blocking", "cells => cells.map(c => c.dataset.id)")) == keeping, "the map marks them", timeout=10)
    assert f"{len(keeping)} devices keep the pod out (taken, tainted or full); marked on the map." in page.text_content(".explanation")
    page.screenshot(path=str(artifact("dashboard-blocking.png")))
    # Another choice clears the marks.
    page.click('.tabs button[data-tab="pending"]')
    page.click('[data-pod="default/big"]')
    page.wait_for_selector("#map .cell.blocking", state="detached", timeout=10000)


def test_the_api_server_going_away_is_shown_and_recovers(page: Any, scenario: tuple[Stack, dict[str, str]]) -> None:
    stack, _ = scenario
    # Killed, as a crash would: on SIGTERM it keeps the dashboard's watches open until the
    # 10 s SIGKILL anyway, so the page would see the same, only 10 s later.
    stack.server.stop(kill=True)
    try:
        page.wait_for_selector("#problems:not([hidden])", timeout=15000)
        assert "cannot reach the API server" in page.text_content("#problems")
        page.screenshot(path=str(artifact("dashboard-server-down.png")))
    finally:
        stack.server.start()
    page.wait_for_selector("#problems", state="hidden", timeout=30000)
    with stack.admin() as admin:
        assert admin.post(PODS, json=pod("after-restart", nodeSelector={"zone": "moon"})).status_code == 201
    page.wait_for_selector('[data-pod="default/after-restart"]', state="attached", timeout=15000)


@contextlib.contextmanager
def error_pages(port: int) -> Iterator[threading.Event]:
    """Something else on the dashboard's port for a while, answering every request with an error
    page, not a stream; the event is set once the page's feed has been refused."""
    refused = threading.Event()

    class Refuser(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(503, "not the dashboard")
            if self.path == "/api/events":
                refused.set()

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Refuser)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield refused
    finally:
        server.shutdown()
        server.server_close()


def test_the_dashboard_server_going_away_is_shown_and_recovers(page: Any, dashboard: Dashboard) -> None:
    dashboard.stop(kill=True)  # as above: on SIGTERM it keeps the page's stream open until the 10 s SIGKILL
    page.wait_for_selector('#live[data-live="reconnecting"]', timeout=10000)
    assert "lost the connection to the dashboard server" in page.text_content("#problems")
    # An error page makes the browser give up on the stream; the page starts over by itself.
    with error_pages(dashboard.port) as refused:
        assert refused.wait(15), "the page did not ask the stand-in for its feed"
        page.wait_for_timeout(500)  # the browser closes the feed on the error page
    dashboard.start()
    page.wait_for_selector('#live[data-live="live"]', timeout=15000)
    page.wait_for_selector("#problems", state="hidden", timeout=10000)
    # The stream is open before its first snapshot is drawn: the pod shows up right after.
    page.wait_for_selector('[data-pod="default/after-restart"]', state="attached", timeout=10000)


def test_many_pending_pods_are_counted_with_their_reasons(browser: Any, scenario: tuple[Stack, dict[str, str]]) -> None:
    """More pending pods than listed: the page says how many and why, and lists the oldest."""
    crowded = Dashboard(scenario[0], free_port(), "--list-limit", "2").start()
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(crowded.url)
        page.wait_for_selector("#crowd:not([hidden])", timeout=10000)
        text = page.text_content("#crowd")
        total = int(page.text_content("#pending-count"))
        assert total >= 3 and text.startswith(f"{total} pods are pending; the 2 oldest are listed. Commonest reasons:"), text
        assert "Unschedulable: 0/2 nodes are available" in text
        assert len(page.query_selector_all("#pending [data-pod]")) == 2
    finally:
        page.close()
        crowded.stop()


def test_artifact_dir_is_ignored_by_git() -> None:
    assert "build/" in (Path(REPO_ROOT) / ".gitignore").read_text().split()
