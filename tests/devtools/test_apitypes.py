"""The checked-in typed dicts (kube/apitypes.pyi and its run-time module) are what the generator
makes of the checked-in protobuf schema and the kinds' extra schema properties (the schema itself is
checked against the Go types by tests/interop/test_protobuf_go.py)."""

from __future__ import annotations

import orjson
import pytest

from devtools import apitypes
from kube import protobuf


@pytest.fixture(scope="module")
def rendered() -> tuple[str, str]:
    return apitypes.render(orjson.loads(protobuf.SCHEMA_PATH.read_bytes()))


def test_the_checked_in_types_are_what_the_schema_says(rendered: tuple[str, str]) -> None:
    stub, module = rendered
    regenerate = "regenerate: python -m devtools.protobufschema --types-only"
    assert apitypes.STUB_PATH.read_text() == stub, regenerate
    assert apitypes.MODULE_PATH.read_text() == module, regenerate


def test_every_stored_kind_has_its_typed_dict(rendered: tuple[str, str]) -> None:
    from app.registry import KINDS, SHARED_STORAGE

    stub, _ = rendered
    for kind in KINDS + SHARED_STORAGE:
        name = kind.kind if kind.api_version != "events.k8s.io/v1" else "EventsV1Event"
        assert f"\nclass {name}(TypedDict, total=False):\n" in stub, kind.kind


def test_the_project_fields_beyond_the_go_types_are_typed(rendered: tuple[str, str]) -> None:
    stub, _ = rendered
    # KEP-5194's fields, declared once in the kinds' extra_schema_properties.
    assert "    reservedFor: ResourceClaimConsumerReference\n" in stub
    assert "    reservedForAnyPod: bool\n" in stub


def test_two_go_types_of_one_name_get_distinct_names() -> None:
    schema = orjson.loads(protobuf.SCHEMA_PATH.read_bytes())
    stub, _ = apitypes.render(schema)
    assert '"""k8s.io/api/resource/v1.ResourceClaim"""' in stub.split("\nclass ResourceClaim(", 1)[1].split("\nclass ", 1)[0]
    assert "\nclass CoreV1ResourceClaim(TypedDict, total=False):\n" in stub


def test_a_json_name_that_is_a_keyword_is_still_a_key(rendered: tuple[str, str]) -> None:
    stub, _ = rendered
    assert '        "continue": str,\n' in stub.split("ListMeta = TypedDict(", 1)[1]


def test_every_name_is_dict_at_run_time() -> None:
    from kube import apitypes as types

    assert types.ResourceClaim is dict
    with pytest.raises(AttributeError):
        types.ResourceClam  # type: ignore[attr-defined]  # noqa: B018
