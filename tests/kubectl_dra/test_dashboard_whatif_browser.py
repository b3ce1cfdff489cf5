"""The dashboard's "What if" panel in a headless Chromium against the whole stack: a pasted pod's
copies are painted on the device map in their own colour, with the same total as ``kubectl dra fit``;
a pending pod can be picked instead; a pod the API server refuses shows the server's message."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devtools.ports import free_port
from devtools.server import REPO_ROOT
from tests.browser import artifact, chromium, needs_chromium
from tests.kubectl_dra.test_dashboard_browser import GPU, PODS, Dashboard, pod
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow, needs_chromium]

WHATIF_COLOUR = "rgb(176, 63, 214)"  # --whatif in whatif.css


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Two nodes of 8 GPUs; a pod holds 4 of them; a pod waits for 16."""
    with running_stack(tmp_path_factory.mktemp("dashboard-whatif")) as stack, stack.admin() as admin:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class).status_code == 201
        for name, count in (("one-gpu", 1), ("four", 4), ("sixteen", 16)):
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": count}}]}}}}  # fmt: skip
            assert admin.post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", json=body).status_code == 201
        assert admin.post(PODS, json=pod("holder", "four")).status_code == 201
        eventually(lambda: admin.get(f"{PODS}/holder").json()["spec"].get("nodeName"), "the holder runs", timeout=60)
        assert admin.post(PODS, json=pod("greedy", "sixteen")).status_code == 201
        yield stack


@pytest.fixture(scope="module")
def page(stack: Stack) -> Iterator[Any]:
    dashboard = Dashboard(stack, free_port()).start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(dashboard.url)
            page.wait_for_selector(".cell")
            yield page
            page.close()
    finally:
        dashboard.stop()


def fit_json(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    path = stack.tmp / "whatif-pod.yaml"
    path.write_text(yaml.safe_dump(body))
    command = [
        sys.executable,
        "-m",
        "kubectl_dra",
        "--kubeconfig",
        str(stack.admin_kubeconfig),
        "fit",
        "-f",
        str(path),
        "--max",
        "100",
        "-o",
        "json",
    ]
    run = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_pasted_pod_copies_are_painted_with_the_clis_total(page: Any, stack: Stack) -> None:
    worker = {**pod("worker", "one-gpu"), "metadata": {"name": "worker", "namespace": "default"}}
    expected = fit_json(stack, worker)
    assert expected["total"] == 12
    page.click('.tabs button[data-tab="whatif"]')
    assert page.is_visible("#tab-whatif") and page.is_hidden("#tab-pending")
    page.fill("#whatif-pod", yaml.safe_dump(worker))
    page.fill("#whatif-max", "100")
    page.click("#whatif-ask")
    page.wait_for_selector("#whatif-total", timeout=20000)
    assert page.get_attribute("#whatif-total", "data-total") == "12"
    assert "Total: 12 copies fit on 2 nodes" in page.text_content("#whatif-total")
    painted = page.eval_on_selector_all(".cell.whatif", "cells => cells.map(c => c.dataset.id)")
    assert sorted(painted) == sorted(d for n in expected["nodes"] for copy in n["devices"] for d in copy)
    colour = page.eval_on_selector(".cell.whatif", "c => getComputedStyle(c).backgroundColor")
    assert colour == WHATIF_COLOUR
    # Painted cells are still their devices: the map's own state is unchanged (nothing was created).
    assert set(page.eval_on_selector_all(".cell.whatif", "cells => cells.map(c => c.dataset.state)")) == {"free"}
    page.screenshot(path=str(artifact("dashboard-whatif.png")))
    page.click("#whatif-clear")
    assert page.eval_on_selector_all(".cell.whatif", "cells => cells.length") == 0


def test_a_picked_pending_pod_and_a_refused_pod(page: Any) -> None:
    page.click('.tabs button[data-tab="whatif"]')
    page.focus("#whatif-pick")
    page.select_option("#whatif-pick", "default/greedy")
    page.click("#whatif-ask")
    page.wait_for_selector("#whatif-total", timeout=20000)
    assert page.get_attribute("#whatif-total", "data-total") == "0"
    assert "claim default/greedy-whatif-0-gpu, request gpu: needs 16 gpu.example.com devices" in page.text_content("#whatif-unfit")
    page.select_option("#whatif-pick", "")
    page.fill("#whatif-pod", yaml.safe_dump({**pod("Bad_Name", "one-gpu")}))
    page.click("#whatif-ask")
    page.wait_for_selector("#whatif-result .error", timeout=20000)
    assert 'Pod "Bad_Name" is invalid: metadata.name' in page.text_content("#whatif-result .error")
