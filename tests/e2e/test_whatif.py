"""What-if capacity on the whole stack: ``kubectl dra fit``'s answer, then that many pods created,
and what the scheduler actually does with them; ``drain-plan``; bad input as the user sees it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_kubectl_dra import GPU, kubectl, pod, template
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow]

PODS = "/api/v1/namespaces/default/pods"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Three nodes of 8 GPUs; one pod already holds 3 GPUs."""
    with running_stack(tmp_path_factory.mktemp("whatif"), nodes=3) as stack, stack.admin() as admin:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class).status_code == 201
        templates = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
        for body in (template("two", 2), template("three", 3)):
            assert admin.post(templates, json=body).status_code == 201, body
        assert admin.post(PODS, json=pod("holder", "three")).status_code == 201
        eventually(lambda: admin.get(f"{PODS}/holder").json()["spec"].get("nodeName"), "the holder runs", timeout=60)
        yield stack


def pod_file(tmp: Path, body: dict[str, object]) -> str:
    path = tmp / "pod.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_fit_then_create_that_many(stack: Stack, tmp_path: Path) -> None:
    """The answer, then the pods: as many bind as fit said, on the nodes it said; one more waits."""
    with stack.admin() as admin:
        claims_before = len(admin.get(CLAIMS).json()["items"])
        run = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "-o", "json")
        assert run.returncode == 0, run.stderr
        answer = json.loads(run.stdout)
        assert list(answer) == ["total", "nodes", "unfit"]
        assert answer["total"] == 10  # (24 - 3) // 2, less the one odd device left on the holder's node
        assert all(len(copy) == 2 and all(d.startswith(f"{GPU}/") for d in copy) for n in answer["nodes"] for copy in n["devices"])
        assert len(admin.get(CLAIMS).json()["items"]) == claims_before  # nothing was created
        predicted = Counter({n["name"]: n["count"] for n in answer["nodes"]})

        for i in range(answer["total"] + 1):
            assert admin.post(PODS, json=pod(f"worker-{i}", "two")).status_code == 201

        def settled() -> bool:
            items = [p for p in admin.get(PODS).json()["items"] if p["metadata"]["name"].startswith("worker-")]
            tried = [
                p
                for p in items
                if p["spec"].get("nodeName") or any(c["type"] == "PodScheduled" for c in (p.get("status") or {}).get("conditions") or [])
            ]
            return len(tried) == len(items)

        eventually(settled, "the scheduler placed or refused every worker", timeout=90)
        items = [p for p in admin.get(PODS).json()["items"] if p["metadata"]["name"].startswith("worker-")]
        actual = Counter(p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName"))
        assert actual == predicted
        assert sum(1 for p in items if not p["spec"].get("nodeName")) == 1

        # Now nothing more fits, and every node says why in kubectl dra why's words.
        after = json.loads(kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "-o", "json").stdout)
        assert after["total"] == 0 and len(after["unfit"]) == 3
        text = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")))
        assert "Total: 0 copies fit on 0 nodes." in text.stdout and "3 nodes take none:" in text.stdout, text.stdout
        why = kubectl(stack, "why", "pod/worker-10")
        assert any(u["reason"].split(": ", 1)[-1] in why.stdout for u in after["unfit"]), (after, why.stdout)

        # Without the workers' node, or with two more nodes of the gpu profile.
        node = sorted(predicted)[0]
        more = json.loads(
            kubectl(
                stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "--add-nodes", "2", "--profile", "gpu", "-o", "json"
            ).stdout
        )
        assert more["total"] == 8 and {n["name"] for n in more["nodes"]} == {"whatif-node-0", "whatif-node-1"}
        plan = json.loads(kubectl(stack, "drain-plan", node, "-o", "json").stdout)
        assert plan["node"] == node and {p["pod"] for p in plan["pods"]} >= {
            f"default/{p['metadata']['name']}" for p in items if p["spec"].get("nodeName") == node
        }
        assert plan["placed"] == 0 and all("reason" in p for p in plan["pods"])  # every device is taken elsewhere


def test_bad_input(stack: Stack, tmp_path: Path) -> None:
    invalid = kubectl(stack, "fit", "-f", pod_file(tmp_path, {**pod("Bad_Name", "two")}))
    assert invalid.returncode == 1 and invalid.stderr.startswith(
        'Error from server (Invalid): Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'
    ), invalid.stderr
    missing = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "nope")))
    assert missing.stderr == 'Error from server (NotFound): resourceclaimtemplates.resource.k8s.io "nope" not found\n'
    named = pod("w")
    named["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "does-not-exist"}]
    no_claim = kubectl(stack, "fit", "-f", pod_file(tmp_path, named))
    assert no_claim.stderr == 'Error from server (NotFound): resourceclaims.resource.k8s.io "does-not-exist" not found\n'
    too_many = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--max", "1000000")
    assert too_many.stderr == (
        'Error from server (Invalid): FitRequest "" is invalid: max: Invalid value: 1000000: must be at most 10000 (the scheduler\'s bound)\n'
    )
    node = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--without-node", "sim-9")
    assert node.stderr == 'Error from server (NotFound): nodes "sim-9" not found\n'
    profile = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--add-nodes", "1", "--profile", "tpu")
    assert profile.stderr.startswith(
        'Error from server (Invalid): FitRequest "" is invalid: changes.addNodes[0].profile: Unsupported value: "tpu": supported values: "cpu", "gpu"'
    ), profile.stderr
    assert kubectl(stack, "drain-plan", "sim-9").stderr == 'Error from server (NotFound): nodes "sim-9" not found\n'
