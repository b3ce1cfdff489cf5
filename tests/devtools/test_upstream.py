"""devtools.upstream without Go: what it installs on an upstream control plane for the workers."""

from __future__ import annotations

import json
from typing import Any

import yaml

from app.auth import bootstrap
from devtools import upstream


def essentials(obj: dict[str, Any]) -> tuple[str, str, str, list[str]]:
    """What grants anything: kind, name, namespace and the rules (in any order) or the binding."""
    meta = obj["metadata"]
    grants = obj.get("rules") or [obj.get("roleRef"), obj.get("subjects")]
    return obj["kind"], meta["name"], meta.get("namespace", ""), sorted(json.dumps(grant, sort_keys=True) for grant in grants)


def test_the_simulator_manifest_grants_what_this_servers_bootstrap_grants() -> None:
    """examples/kubeletsim/rbac.yaml, applied to upstream's kube-apiserver, gives the simulator's
    identities the same permissions this project's server gives them at start."""
    manifest = [doc for doc in yaml.safe_load_all(upstream.SIMULATOR_RBAC.read_text()) if doc]
    names = {f"system:{bootstrap.DRIVER_SERVICE_ACCOUNT}", bootstrap.KUBELETSIM_USER}
    served = [
        *bootstrap.service_accounts(),
        *(role for role in bootstrap.cluster_roles() if role["metadata"]["name"] in names),
        *(binding for binding in bootstrap.cluster_role_bindings() if binding["metadata"]["name"] in names),
    ]
    assert sorted(map(essentials, manifest), key=repr) == sorted(map(essentials, served), key=repr)


def test_the_scheduler_manifest_grants_what_this_servers_bootstrap_grants() -> None:
    """examples/scheduler/rbac.yaml is the bootstrap's what-if role of the scheduler, for upstream's kube-apiserver."""
    manifest = [doc for doc in yaml.safe_load_all(upstream.SCHEDULER_RBAC.read_text()) if doc]
    served = [
        *(role for role in bootstrap.cluster_roles() if role["metadata"]["name"] == bootstrap.SCHEDULER_WHATIF_ROLE),
        *(binding for binding in bootstrap.cluster_role_bindings() if binding["metadata"]["name"] == bootstrap.SCHEDULER_WHATIF_ROLE),
    ]
    assert sorted(map(essentials, manifest), key=repr) == sorted(map(essentials, served), key=repr)
