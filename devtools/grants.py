"""What the development stacks grant beyond the server's bootstrap policy, made as the admin once
the server is up: ``make run`` and the tests' stacks call :func:`apply_grants`; docker compose runs
``python -m devtools.grants --kubeconfig ADMIN.kubeconfig`` as a one-shot job.

The admin of :mod:`devtools.credentials` (``kubernetes-admin``) is a member of ``system:masters``,
whom constrained impersonation never acts as. The scheduler has the API server check a what-if's
pod as its asker (``schedulers/whatifserver.py``: a dry run create, impersonating the asker); so
that this works for that admin too, the scheduler may impersonate exactly that user and group the
legacy way (``impersonate``). A cluster whose admins get their rights from RBAC needs no such grant:
the bootstrap role ``system:dra-scheduler-whatif`` covers every other user."""

from __future__ import annotations

import argparse
import sys

import httpx

from devtools.credentials import IDENTITIES
from kube.client import resource_path
from kube.kubeconfig import load_kubeconfig

ADMIN_IMPERSONATION = "dra-dev:scheduler-impersonates-admin"
RBAC = "rbac.authorization.k8s.io"


def grants() -> list[tuple[str, dict[str, object]]]:
    """(plural, object) of each ClusterRole and ClusterRoleBinding granted."""
    admin, groups = IDENTITIES["admin"]
    scheduler, _ = IDENTITIES["scheduler"]
    role: dict[str, object] = {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": ADMIN_IMPERSONATION},
        "rules": [{"apiGroups": [""], "resources": ["users"], "resourceNames": [admin], "verbs": ["impersonate"]},
                  {"apiGroups": [""], "resources": ["groups"], "resourceNames": list(groups), "verbs": ["impersonate"]}],
    }  # fmt: skip
    binding: dict[str, object] = {
        "apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": ADMIN_IMPERSONATION},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": ADMIN_IMPERSONATION},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": scheduler}],
    }  # fmt: skip
    return [("clusterroles", role), ("clusterrolebindings", binding)]


def apply_grants(client: httpx.Client) -> None:
    """Create the grants as ``client`` (the admin); those that exist are left as they are."""
    for plural, obj in grants():
        response = client.post(resource_path(RBAC, "v1", plural), json=obj)
        if response.status_code not in (201, 409):
            raise RuntimeError(f"{plural} {ADMIN_IMPERSONATION}: {response.status_code} {response.text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.grants", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="the admin's kubeconfig")
    args = parser.parse_args(argv)
    connection = load_kubeconfig(args.kubeconfig)
    headers = {"Authorization": f"Bearer {connection.token}"} if connection.token else {}
    try:
        with httpx.Client(base_url=connection.server, verify=connection.ssl_context() or False, headers=headers, timeout=30.0) as client:
            apply_grants(client)
    except (httpx.HTTPError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
