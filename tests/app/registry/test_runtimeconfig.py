"""--runtime-config: what each spelling enables, and kube-apiserver's refusals word for word."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.__main__ import main
from app.registry import KINDS, SHARED_STORAGE
from app.registry.runtimeconfig import RuntimeConfigError, enabled_kinds, parse_configuration_map
from kube.features import FeatureGates, Gate, gates_flag


def _older(text: str) -> set[str]:
    """The older versions ``text`` enables, as ``version/plural``."""
    return {f"{k.version}/{k.plural}" for k in enabled_kinds(text) if k.version != "v1"}


BETA2 = {f"v1beta2/{p}" for p in ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices", "devicetaintrules")}


def test_without_the_flag_only_the_stable_versions_are_served() -> None:
    assert enabled_kinds("") == tuple(k for k in KINDS + SHARED_STORAGE if k.version == "v1")


@pytest.mark.parametrize(
    ("flag", "older"),
    [
        ("resource.k8s.io/v1beta2=true", BETA2),
        ("resource.k8s.io/v1beta2", BETA2),  # no value means true
        ("resource.k8s.io/v1alpha3=true", {"v1alpha3/devicetaintrules"}),
        ("api/all=true", BETA2 | {"v1alpha3/devicetaintrules"}),
        ("api/beta=true", BETA2),
        ("api/alpha=true", {"v1alpha3/devicetaintrules"}),
        ("api/all=true,resource.k8s.io/v1beta2=false", {"v1alpha3/devicetaintrules"}),
        ("resource.k8s.io/v1beta2/resourceclaims=true", {"v1beta2/resourceclaims"}),
        ("api/beta=true,resource.k8s.io/v1beta2/resourceslices=false", BETA2 - {"v1beta2/resourceslices"}),
        (" resource.k8s.io/v1beta2 = True ,", BETA2),
        ("resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta2=0", set()),  # the last one wins
        ("api/legacy=false", set()),  # obsolete, ignored as upstream does
    ],
)
def test_the_flag_enables_what_upstream_enables(flag: str, older: set[str]) -> None:
    assert _older(flag) == older


def test_resource_pool_status_requests_need_their_version_and_their_gate() -> None:
    gate = FeatureGates.parse(gates_flag({Gate.DRAResourcePoolStatus: True}))
    assert "v1alpha3/resourcepoolstatusrequests" not in _older("resource.k8s.io/v1alpha3=true")
    served = {(k.version, k.plural) for k in enabled_kinds("resource.k8s.io/v1alpha3=true", gate)}
    assert ("v1alpha3", "resourcepoolstatusrequests") in served
    assert not any(k.plural == "resourcepoolstatusrequests" for k in enabled_kinds("", gate))


def test_core_v1_keys_address_the_core_group() -> None:
    assert parse_configuration_map("v1=false,api/v1=true,a/b=1,c") == {"/v1": "true", "a/b": "1", "c": ""}
    served = {(k.group, k.version) for k in enabled_kinds("v1=false,api/all=true")}
    assert ("", "v1") not in served
    assert ("resource.k8s.io", "v1beta2") in served


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("api/all=false", "invalid key with only api/all=false"),
        ("resource.k8s.io", "runtime-config invalid key resource.k8s.io"),
        ("a/b/c/d=true", "runtime-config invalid key a/b/c/d"),
        ("networking.k8s.io/v1=true", "unknown api groups networking.k8s.io"),
        ("resource.k8s.io/v1beta1=true", "group version resource.k8s.io/v1beta1 that has not been registered"),
        ("resource.k8s.io/v1beta2=maybe", 'invalid value of resource.k8s.io/v1beta2: maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax'),
        ("api/beta=1", "invalid value api/beta=1"),
        ("api/all", "invalid value api/all="),
        (
            "resource.k8s.io/v1beta2/ResourceClaims=true",
            'invalid key resource.k8s.io/v1beta2/ResourceClaims: group/version/resource and resource is always lowercase plural, not "ResourceClaims"',
        ),
    ],
)
def test_a_flag_upstream_refuses_is_refused_with_its_message(flag: str, message: str) -> None:
    with pytest.raises(RuntimeConfigError) as caught:
        enabled_kinds(flag)
    assert str(caught.value) == message


def test_the_server_does_not_start_with_a_bad_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'never.sqlite'}"
    assert main(["--database-url", database, "--runtime-config", "resource.k8s.io/v9=true"]) == 2
    assert capsys.readouterr().err == "error: invalid --runtime-config: group version resource.k8s.io/v9 that has not been registered\n"
    assert not (tmp_path / "never.sqlite").exists()
