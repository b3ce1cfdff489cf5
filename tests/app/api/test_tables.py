"""Server-side Tables and the metadata-only conversions."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.tables import table_bookmark, table_for, table_for_object
from app.registry import lookup
from app.registry.base import KindStrategy


def _strategy(group: str, plural: str) -> KindStrategy:
    strategy = lookup(group, "v1", plural)
    assert strategy is not None
    return strategy


CLAIMS = _strategy("resource.k8s.io", "resourceclaims")
PODS = _strategy("", "pods")


def _claim(name: str, rv: str = "7", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "resourceVersion": rv,
            "labels": {"app": "demo"},
            "creationTimestamp": "2020-01-01T00:00:00Z",
        },
        "spec": {"devices": {"requests": []}},
        "status": status,
    }


def test_list_table_columns_rows_and_metadata() -> None:
    claims = [_claim("a"), _claim("b", allocation={"devices": {}}, reservedFor=[{"resource": "pods"}])]
    table = table_for(CLAIMS, claims, {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3})
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3}
    columns = table["columnDefinitions"]
    assert [c["name"] for c in columns] == ["Name", "State", "Age"]
    assert columns[0]["format"] == "name"
    assert all(set(c) == {"name", "type", "format", "description", "priority"} for c in columns)
    rows = table["rows"]
    assert [row["cells"][:2] for row in rows] == [["a", "pending"], ["b", "allocated,reserved"]]
    partial = rows[0]["object"]
    assert partial["kind"] == "PartialObjectMetadata"
    assert partial["apiVersion"] == "meta.k8s.io/v1"
    assert partial["metadata"]["namespace"] == "default"
    assert partial["metadata"]["labels"] == {"app": "demo"}
    assert "spec" not in partial


def test_empty_list_meta_values_are_left_out() -> None:
    table = table_for(CLAIMS, [], {"resourceVersion": "5", "continue": ""})
    assert table["metadata"] == {"resourceVersion": "5"}
    assert table["rows"] == []


def test_include_object_policies() -> None:
    claim = _claim("a")
    assert table_for(CLAIMS, [claim], {}, "Object")["rows"][0]["object"] == claim
    assert "object" not in table_for(CLAIMS, [claim], {}, "None")["rows"][0]
    assert table_for(CLAIMS, [claim], {}, "")["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table_for(CLAIMS, [claim], {}, None)["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    with pytest.raises(ValueError, match="includeObject"):
        table_for(CLAIMS, [claim], {}, "Everything")


def test_single_object_table_uses_object_resource_version() -> None:
    table = table_for_object(CLAIMS, _claim("a", rv="99"))
    assert table["metadata"] == {"resourceVersion": "99"}
    assert len(table["rows"]) == 1


def test_wide_columns_keep_priority() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [{"ready": True, "restartCount": 2}]},
    }
    table = table_for_object(PODS, pod)
    by_name = {
        c["name"]: (c["priority"], cell)
        for c, cell in zip(table["columnDefinitions"], table["rows"][0]["cells"], strict=True)
    }
    assert by_name["Ready"] == (0, "1/1")
    assert by_name["Status"] == (0, "Running")
    assert by_name["Node"] == (1, "n1")


def test_bookmark_table() -> None:
    assert table_bookmark("12") == {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "12"},
        "columnDefinitions": [],
        "rows": [],
    }
