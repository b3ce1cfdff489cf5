"""The checked-in typed dicts (kube/apitypes.pyi and its run-time module) are what the generator
makes of the checked-in protobuf schema and the kinds' extra schema properties (the schema itself is
checked against the Go types by tests/interop/test_protobuf_go.py)."""

from __future__ import annotations

import orjson
import pytest

from app import protobuf
from devtools import apitypes


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


def test_the_openapi_definitions_declare_the_go_types_fields() -> None:
    """The third place a field is declared, the official OpenAPI definitions that pruning, strict
    validation and the served documents use, agrees with the Go types field for field: what the
    project adds is only its extra_schema_properties."""
    from app.api.openapi import source_definitions

    schema = orjson.loads(protobuf.SCHEMA_PATH.read_bytes())
    definitions = source_definitions()

    def go_fields(message: str) -> set[str]:
        fields: set[str] = set()
        for field in schema["messages"][message] or []:
            fields |= go_fields(field["message"]) if field.get("inline") else {field["json"]}
        return fields

    inlined = {f["message"] for fields in schema["messages"].values() for f in fields or [] if f.get("inline")}
    compared = 0
    for message, is_kind in apitypes.typed_messages(schema).items():
        name = "io." + message.replace("k8s.io/apimachinery/", "k8s.apimachinery.").replace("k8s.io/api/", "k8s.api.").replace("/", ".")
        definition = definitions.get(name)
        if definition is None:
            assert message in inlined, f"{message}: no OpenAPI definition {name}"
            continue
        declared = set(definition.get("properties") or {}) - ({"apiVersion", "kind"} if is_kind else set())
        assert declared == go_fields(message), message
        compared += 1
    assert compared > 400


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
