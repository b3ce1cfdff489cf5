"""The real kubectl changing objects: create, apply, replace, edit, patch, label, annotate and delete,
asserting what a user sees (test_kubectl.py's docstring says how kubectl runs).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import yaml

from tests.clients.kubectl_helpers import (
    ALLOCATION,
    Kubectl,
    build_claim,
    build_class,
    build_lease,
    build_node,
    build_pod,
    build_slice,
    build_taint_rule,
    build_template,
    created,
    defaulted_spec,
    names_in,
    now,
    parse_table,
    write,
)
from tests.helpers import RESOURCE, claim, claims_path, pod

# ---- create, apply, replace, edit ------------------------------------------------------


def test_create_from_yaml(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    template = build_template("tmpl", ns, {"app": "demo"})
    path = write(tmp_path, "objs.yaml", build_claim("c1", ns, {"app": "demo"}), template)
    out = kubectl.ok("create", "-f", path, "-n", ns)
    assert out.splitlines() == ["resourceclaim.resource.k8s.io/c1 created", "resourceclaimtemplate.resource.k8s.io/tmpl created"]
    got = api.get(claims_path(ns, "c1")).json()
    assert got["metadata"]["labels"] == {"app": "demo"}
    assert any(m["manager"] == "kubectl-create" for m in got["metadata"].get("managedFields", [])), got["metadata"]

    result = kubectl.fails("create", "-f", path, "-n", ns)
    assert result.code == 1
    assert f'Error from server (AlreadyExists): error when creating "{path}": resourceclaims.resource.k8s.io "c1" already exists' in result.err

    # Server-side dry run: reported, not stored.
    dry = write(tmp_path, "dry.yaml", build_claim("dry", ns, {}))
    assert kubectl.ok("create", "-f", dry, "-n", ns, "--dry-run=server").strip() == "resourceclaim.resource.k8s.io/dry created (server dry run)"
    assert api.get(claims_path(ns, "dry")).status_code == 404

    # kubectl validates strictly on the server by default.
    bad = build_claim("bad", ns, {})
    bad["spec"]["bogus"] = 1
    result = kubectl.fails("create", "-f", write(tmp_path, "bad.yaml", bad), "-n", ns)
    assert 'unknown field "spec.bogus"' in result.err, str(result)
    assert "failed to download openapi" not in result.err
    assert api.get(claims_path(ns, "bad")).status_code == 404

    # Invalid objects come back as kubectl's formatted 422.
    invalid = build_claim("Bad_Name", ns, {})
    result = kubectl.fails("create", "-f", write(tmp_path, "invalid.yaml", invalid), "-n", ns)
    assert 'The ResourceClaim "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"' in result.err, str(result)

    # A namespace that does not exist.
    result = kubectl.fails("create", "-f", write(tmp_path, "other.yaml", build_claim("c2", ns, {})), "-n", f"{ns}-missing")
    assert f'namespaces "{ns}-missing" not found' in result.err, str(result)


def test_create_cluster_scoped_and_core_kinds_from_yaml(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    docs = [
        build_class(f"{ns}-gpu", ns, {}),
        build_slice(f"{ns}-slice", ns, {}),
        build_taint_rule(f"{ns}-taint", ns, {}),
        build_node(f"{ns}-node", ns, {}),
        {**pod("p1"), "metadata": {"name": "p1", "namespace": ns}},
        {**build_lease("l1", ns, {}), "metadata": {"name": "l1", "namespace": ns}},
    ]
    out = kubectl.ok("create", "-f", write(tmp_path, "all.yaml", *docs))
    assert out.splitlines() == [
        f"deviceclass.resource.k8s.io/{ns}-gpu created",
        f"resourceslice.resource.k8s.io/{ns}-slice created",
        f"devicetaintrule.resource.k8s.io/{ns}-taint created",
        f"node/{ns}-node created",
        "pod/p1 created",
        "lease.coordination.k8s.io/l1 created",
    ]
    assert api.get(f"/api/v1/namespaces/{ns}/pods/p1").json()["spec"]["schedulerName"] == "default-scheduler"
    out = kubectl.ok("delete", "-f", str(tmp_path / "all.yaml"))
    assert f'deviceclass.resource.k8s.io "{ns}-gpu" deleted' in out
    assert 'pod "p1" deleted' in out
    assert api.get(f"{RESOURCE}/deviceclasses/{ns}-gpu").status_code == 404


def test_apply_client_side(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("applied", ns, {"stage": "one", "keep": "yes"})
    path = write(tmp_path, "claim.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied created"
    stored = api.get(claims_path(ns, "applied")).json()
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]

    body["metadata"]["labels"] = {"stage": "two"}  # changed one label, dropped another
    path = write(tmp_path, "claim.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied configured"
    assert api.get(claims_path(ns, "applied")).json()["metadata"]["labels"] == {"stage": "two"}

    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied unchanged"

    # Labels someone else added survive a re-apply (three-way merge).
    response = api.patch(claims_path(ns, "applied"), json={"metadata": {"labels": {"other": "x"}}}, headers={"content-type": "application/merge-patch+json"})
    assert response.status_code == 200
    body["metadata"]["labels"] = {"stage": "three"}
    assert kubectl.ok("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied configured"
    assert api.get(claims_path(ns, "applied")).json()["metadata"]["labels"] == {"stage": "three", "other": "x"}


def test_claim_spec_is_immutable(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("frozen", ns, {})
    assert kubectl.ok("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/frozen created"
    # apply (a patch) of a changed spec: the server's 422, formatted by kubectl.
    body["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other.example.com"
    result = kubectl.fails("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns)
    assert 'The ResourceClaim "frozen" is invalid: spec: Invalid value:' in result.err and "field is immutable" in result.err, str(result)
    # replace (a PUT) of a changed spec.
    fresh = yaml.safe_load(kubectl.ok("get", "resourceclaim", "frozen", "-n", ns, "-o", "yaml"))
    fresh["spec"]["devices"]["requests"][0]["name"] = "renamed"
    result = kubectl.fails("replace", "-f", write(tmp_path, "spec.yaml", fresh))
    assert 'The ResourceClaim "frozen" is invalid: spec: Invalid value:' in result.err and "field is immutable" in result.err, str(result)
    stored = api.get(claims_path(ns, "frozen")).json()
    assert stored["spec"] == defaulted_spec()
    assert stored["metadata"]["generation"] == 1
    # The same for templates.
    created(api, f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", build_template("tmpl", ns, {}))
    result = kubectl.fails("patch", "resourceclaimtemplate", "tmpl", "-n", ns, "--type=json", "-p", '[{"op":"replace","path":"/spec/spec/devices/requests/0/name","value":"x"}]')
    assert 'The ResourceClaimTemplate "tmpl" is invalid' in result.err and "field is immutable" in result.err, str(result)


def test_apply_client_side_pod_and_device_class(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_pod("web", ns, {})
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    path = write(tmp_path, "pod.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "pod/web created"
    body["spec"]["containers"][1]["image"] = "busybox:2"
    assert kubectl.ok("apply", "-f", write(tmp_path, "pod.yaml", body), "-n", ns).strip() == "pod/web configured"
    containers = api.get(f"/api/v1/namespaces/{ns}/pods/web").json()["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "registry.k8s.io/pause:3.10"), ("side", "busybox:2")]

    cls = build_class(f"{ns}-applied", ns, {})
    assert kubectl.ok("apply", "-f", write(tmp_path, "cls.yaml", cls)).strip() == f"deviceclass.resource.k8s.io/{ns}-applied created"
    cls["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "other.example.com"'
    assert kubectl.ok("apply", "-f", write(tmp_path, "cls.yaml", cls)).strip() == f"deviceclass.resource.k8s.io/{ns}-applied configured"
    stored = api.get(f"{RESOURCE}/deviceclasses/{ns}-applied").json()
    assert stored["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "other.example.com"'}}]
    assert stored["metadata"]["generation"] == 2


def test_apply_server_side_and_conflicts(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("ssa", ns, {"team": "a"})
    path = write(tmp_path, "ssa.yaml", body)
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"
    stored = api.get(claims_path(ns, "ssa")).json()
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["kubectl"]
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"

    body["metadata"]["labels"] = {"team": "b"}
    other = write(tmp_path, "ssa-other.yaml", body)
    result = kubectl.fails("apply", "--server-side", "--field-manager=other", "-f", other, "-n", ns)
    assert result.code == 1
    # (Upstream: 'Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.team'; the count
    # depends on the manager entries, which test_apply_server_side_records_apply_operation pins down.)
    assert re.search(r'Apply failed with \d+ conflicts?: conflicts? with "kubectl"', result.err), str(result)
    assert ".metadata.labels.team" in result.err
    assert api.get(claims_path(ns, "ssa")).json()["metadata"]["labels"] == {"team": "a"}

    out = kubectl.ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other, "-n", ns)
    assert out.strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"
    stored = api.get(claims_path(ns, "ssa")).json()
    assert stored["metadata"]["labels"] == {"team": "b"}
    managers = {m["manager"]: m for m in stored["metadata"]["managedFields"]}
    assert "f:team" in json.dumps(managers["other"]["fieldsV1"])
    assert "f:team" not in json.dumps(managers.get("kubectl", {}).get("fieldsV1", {}))

    # Server-side apply creates objects too, and shows managed fields on request.
    created_path = write(tmp_path, "new.yaml", build_claim("ssa-new", ns, {}))
    assert kubectl.ok("apply", "--server-side", "-f", created_path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa-new serverside-applied"
    shown = yaml.safe_load(kubectl.ok("get", "resourceclaim", "ssa-new", "-n", ns, "-o", "yaml", "--show-managed-fields"))
    assert shown["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert "managedFields" not in yaml.safe_load(kubectl.ok("get", "resourceclaim", "ssa-new", "-n", ns, "-o", "yaml"))["metadata"]


def test_apply_server_side_records_apply_operation(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    """Objects created or changed by ``apply --server-side`` are owned by an Apply manager."""
    body = build_claim("owned", ns, {"team": "a"})
    path = write(tmp_path, "owned.yaml", body)
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/owned serverside-applied"
    entries = api.get(claims_path(ns, "owned")).json()["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in entries] == [("kubectl", "Apply")], entries
    # Same config again: a no-op, the object is not rewritten.
    rv = api.get(claims_path(ns, "owned")).json()["metadata"]["resourceVersion"]
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/owned serverside-applied"
    assert api.get(claims_path(ns, "owned")).json()["metadata"]["resourceVersion"] == rv
    created(api, claims_path(ns), build_claim("updated", ns, {}))
    body = build_claim("updated", ns, {"team": "a"})
    assert kubectl.ok("apply", "--server-side", "-f", write(tmp_path, "updated.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/updated serverside-applied"
    entries = api.get(claims_path(ns, "updated")).json()["metadata"]["managedFields"]
    assert ("kubectl", "Apply") in [(m["manager"], m["operation"]) for m in entries], entries


def test_replace_and_edit(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    created(api, claims_path(ns), build_claim("r1", ns, {"stage": "one"}))
    current = yaml.safe_load(kubectl.ok("get", "resourceclaim", "r1", "-n", ns, "-o", "yaml"))
    current["metadata"]["labels"]["stage"] = "two"
    path = write(tmp_path, "r1.yaml", current)
    assert kubectl.ok("replace", "-f", path).strip() == "resourceclaim.resource.k8s.io/r1 replaced"
    stored = api.get(claims_path(ns, "r1")).json()
    assert stored["metadata"]["labels"] == {"stage": "two"}
    assert any(m["manager"] == "kubectl-replace" and m["operation"] == "Update" for m in stored["metadata"]["managedFields"])

    # The file still carries the old resourceVersion: the server refuses.
    result = kubectl.fails("replace", "-f", path)
    assert 'Error from server (Conflict): error when replacing' in result.err, str(result)
    assert 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "r1": the object has been modified; please apply your changes to the latest version and try again' in result.err

    # kubectl edit with a scripted editor.
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i -e "s/stage: two/stage: three/" "$1"\n')
    editor.chmod(0o755)
    out = kubectl.ok("edit", "resourceclaim", "r1", "-n", ns, env={"KUBE_EDITOR": str(editor)})
    assert out.strip() == "resourceclaim.resource.k8s.io/r1 edited"
    assert api.get(claims_path(ns, "r1")).json()["metadata"]["labels"] == {"stage": "three"}
    # Nothing changed in the editor: kubectl says so and writes nothing.
    result = kubectl.run("edit", "resourceclaim", "r1", "-n", ns, env={"KUBE_EDITOR": str(editor)})
    assert result.code == 0 and "Edit cancelled, no changes made." in result.err, str(result)

    # edit of a pod: change an image in place (a mutable pod field).
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("ep"))
    editor.write_text('#!/bin/sh\nsed -i -e "s#image: registry.k8s.io/pause:3.10#image: registry.k8s.io/pause:3.11#" "$1"\n')
    assert kubectl.ok("edit", "pod", "ep", "-n", ns, env={"KUBE_EDITOR": str(editor)}).strip() == "pod/ep edited"
    assert api.get(f"/api/v1/namespaces/{ns}/pods/ep").json()["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.11"


# ---- patch, label, annotate ----------------------------------------------------------


def test_patch_types(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("p1"))
    ref = "resourceclaim.resource.k8s.io/p1"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "-p", '{"metadata":{"labels":{"a":"1"}}}')
    assert out.strip() == f"{ref} patched"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "-p", '{"metadata":{"labels":{"a":"1"}}}')
    assert out.strip() == f"{ref} patched (no change)"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=merge", "-p", '{"metadata":{"labels":{"b":"2","a":null}}}')
    assert out.strip() == f"{ref} patched"
    assert api.get(claims_path(ns, "p1")).json()["metadata"]["labels"] == {"b": "2"}
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=json", "-p", '[{"op":"add","path":"/metadata/annotations","value":{"note":"x"}},{"op":"replace","path":"/metadata/labels/b","value":"3"}]')
    assert out.strip() == f"{ref} patched"
    meta = api.get(claims_path(ns, "p1")).json()["metadata"]
    assert meta["labels"] == {"b": "3"} and meta["annotations"] == {"note": "x"}
    result = kubectl.fails("patch", "resourceclaim", "p1", "-n", ns, "--type=json", "-p", '[{"op":"test","path":"/metadata/labels/b","value":"nope"}]')
    # Upstream answers a failed "test" op with a 422 whose message kubectl prints like this.
    assert result.err.strip() == "The request is invalid: the server rejected our request due to an error in our request", str(result)
    assert api.get(claims_path(ns, "p1")).json()["metadata"]["labels"] == {"b": "3"}

    # The main resource ignores status; the status subresource takes it.
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=merge", "-p", json.dumps({"status": {"allocation": ALLOCATION}}))
    assert out.strip() == f"{ref} patched (no change)"
    assert parse_table(kubectl.ok("get", "resourceclaim", "p1", "-n", ns))[1][0]["STATE"] == "pending"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {"allocation": ALLOCATION}}))
    assert out.strip() == f"{ref} patched"
    assert parse_table(kubectl.ok("get", "resourceclaim", "p1", "-n", ns))[1][0]["STATE"] == "allocated"
    status = json.loads(kubectl.ok("get", "resourceclaim", "p1", "-n", ns, "--subresource=status", "-o", "json"))
    assert status["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    # The spec cannot be changed through /status.
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--subresource=status", "--type=merge", "-p", '{"spec":{"devices":{"requests":[]}}}')
    assert out.strip() == f"{ref} patched (no change)"
    assert api.get(claims_path(ns, "p1")).json()["spec"] == defaulted_spec()


def test_patch_pod_strategic_merges_containers(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    body = pod("sp")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    created(api, f"/api/v1/namespaces/{ns}/pods", body)
    out = kubectl.ok("patch", "pod", "sp", "-n", ns, "-p", '{"spec":{"containers":[{"name":"side","image":"busybox:2"}]}}')
    assert out.strip() == "pod/sp patched"
    containers = api.get(f"/api/v1/namespaces/{ns}/pods/sp").json()["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "registry.k8s.io/pause:3.10"), ("side", "busybox:2")]
    # Pod status through the status subresource.
    condition = {"type": "Ready", "status": "False", "lastTransitionTime": now()}
    out = kubectl.ok("patch", "pod", "sp", "-n", ns, "--subresource=status", "-p", json.dumps({"status": {"phase": "Running", "conditions": [condition]}}))
    assert out.strip() == "pod/sp patched"
    row = parse_table(kubectl.ok("get", "pod", "sp", "-n", ns))[1][0]
    assert row["STATUS"] == "Running" and row["READY"] == "0/2"
    # Nodes: cordon is a strategic patch of spec.unschedulable.
    node = f"{ns}-cordon"
    created(api, "/api/v1/nodes", build_node(node, ns, {}))
    assert kubectl.ok("cordon", node).strip() == f"node/{node} cordoned"
    assert parse_table(kubectl.ok("get", "node", node))[1][0]["STATUS"] == "Unknown,SchedulingDisabled"
    assert kubectl.ok("uncordon", node).strip() == f"node/{node} uncordoned"


def test_label_and_annotate(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("l1"))
    created(api, claims_path(ns), claim("l2"))
    ref = "resourceclaim.resource.k8s.io"
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier=gold").strip() == f"{ref}/l1 labeled"
    result = kubectl.fails("label", "resourceclaim", "l1", "-n", ns, "tier=silver")
    assert "'tier' already has a value (gold), and --overwrite is false" in result.err
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier=silver", "--overwrite").strip() == f"{ref}/l1 labeled"
    assert api.get(claims_path(ns, "l1")).json()["metadata"]["labels"] == {"tier": "silver"}
    assert kubectl.ok("label", "resourceclaims", "--all", "-n", ns, "batch=x").splitlines() == [f"{ref}/l1 labeled", f"{ref}/l2 labeled"]
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier-").strip() == f"{ref}/l1 unlabeled"
    assert api.get(claims_path(ns, "l1")).json()["metadata"]["labels"] == {"batch": "x"}

    assert kubectl.ok("annotate", "resourceclaim", "l2", "-n", ns, "note=hello world").strip() == f"{ref}/l2 annotated"
    assert api.get(claims_path(ns, "l2")).json()["metadata"]["annotations"] == {"note": "hello world"}
    assert kubectl.ok("annotate", "resourceclaim", "l2", "-n", ns, "note-").strip() == f"{ref}/l2 annotated"
    assert not api.get(claims_path(ns, "l2")).json()["metadata"].get("annotations")

    node = f"{ns}-labeled"
    created(api, "/api/v1/nodes", build_node(node, ns, {}))
    assert kubectl.ok("label", "node", node, "node-role.kubernetes.io/worker=").strip() == f"node/{node} labeled"
    assert parse_table(kubectl.ok("get", "node", node))[1][0]["ROLES"] == "worker"
    assert kubectl.ok("label", "ns", ns, "team=dra").strip() == f"namespace/{ns} labeled"
    assert names_in(kubectl.ok("get", "ns", "-l", "team=dra")) == [ns]


# ---- delete -------------------------------------------------------------------------------


def test_delete(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    for name, tier in (("d1", "x"), ("d2", "y"), ("d3", "y"), ("d4", "z")):
        created(api, claims_path(ns), claim(name, labels={"tier": tier}))
    out = kubectl.ok("delete", "resourceclaim", "d1", "-n", ns)
    assert out.strip() == f'resourceclaim.resource.k8s.io "d1" deleted from {ns} namespace'
    assert api.get(claims_path(ns, "d1")).status_code == 404
    out = kubectl.ok("delete", "resourceclaims", "-l", "tier=y", "-n", ns)
    assert sorted(out.splitlines()) == [f'resourceclaim.resource.k8s.io "{n}" deleted from {ns} namespace' for n in ("d2", "d3")]
    assert names_in(kubectl.ok("get", "resourceclaims", "-n", ns)) == ["d4"]
    result = kubectl.fails("delete", "resourceclaim", "d1", "-n", ns)
    assert 'Error from server (NotFound): resourceclaims.resource.k8s.io "d1" not found' in result.err
    assert kubectl.run("delete", "resourceclaim", "d1", "-n", ns, "--ignore-not-found").code == 0
    # A claim with a finalizer lingers as "deleted" until the finalizer is removed.
    api.patch(claims_path(ns, "d4"), json={"metadata": {"finalizers": ["example.com/hold"]}}, headers={"content-type": "application/merge-patch+json"})
    out = kubectl.ok("delete", "resourceclaim", "d4", "-n", ns, "--wait=false")
    assert out.strip() == f'resourceclaim.resource.k8s.io "d4" deleted from {ns} namespace'
    assert parse_table(kubectl.ok("get", "resourceclaim", "d4", "-n", ns))[1][0]["STATE"] == "deleted"
    waiter = kubectl.background("wait", "--for=delete", "resourceclaim/d4", "-n", ns, "--timeout=30s", "-v=6")
    # Only once kubectl has found the claim and watches it does it report "condition met";
    # a claim already gone when it starts is, by design, reported with no output at all.
    waiter.expect_stderr(lambda line: "watch=true" in line)
    api.patch(claims_path(ns, "d4"), json={"metadata": {"finalizers": None}}, headers={"content-type": "application/merge-patch+json"})
    result = waiter.finish()
    assert result.code == 0, str(result)
    assert "resourceclaim.resource.k8s.io/d4 condition met" in result.out
    # Cluster-scoped and core kinds.
    created(api, f"{RESOURCE}/deviceclasses", build_class(f"{ns}-del", ns, {}))
    assert kubectl.ok("delete", "deviceclass", f"{ns}-del").strip() == f'deviceclass.resource.k8s.io "{ns}-del" deleted'
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("dp"))
    assert kubectl.ok("delete", "pod", "dp", "-n", ns).strip() == f'pod "dp" deleted from {ns} namespace'


def test_delete_bound_pod_force(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("bound", node="somewhere"))
    result = kubectl.run("delete", "pod", "bound", "-n", ns, "--grace-period=0", "--force")
    assert result.code == 0, str(result)
    assert f'pod "bound" force deleted from {ns} namespace' in result.out
    assert api.get(f"/api/v1/namespaces/{ns}/pods/bound").status_code == 404
