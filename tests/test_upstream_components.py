"""docs/upstream-components.md matches what the server serves: each row's resource is served as
the row says (fully, as storage, already, or not at all), and every kind served as storage only
is there because a row needs it."""

from __future__ import annotations

from pathlib import Path

from app.registry import ALL_KINDS, KINDS, SHARED_STORAGE, lookup
from app.registry.base import KindStrategy
from app.registry.storageonly import StorageOnlyStrategy

DOC = Path(__file__).resolve().parents[1] / "docs" / "upstream-components.md"
COLUMNS = ["component", "API", "resource", "verbs used", "served before", "this change"]
OUTCOMES = {"served fully", "served as storage", "already served", "not served"}


def _rows() -> list[dict[str, str]]:
    lines = DOC.read_text().splitlines()
    start = lines.index("| " + " | ".join(COLUMNS) + " |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == len(COLUMNS), line
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows


def _served(api: str, resource: str) -> KindStrategy | None:
    group, _, version = api.rpartition("/")
    plural = resource.split("/")[0]
    kind = lookup(group, version, plural)
    if kind is None or "/" not in resource:
        return kind
    return kind if any(sub.name == resource.split("/")[1] for sub in kind.subresources) else None


def test_every_row_is_served_as_it_says() -> None:
    rows = _rows()
    assert {r["component"] for r in rows} == {"kube-scheduler", "kube-controller-manager"}
    for row in rows:
        outcome = row["this change"]
        assert outcome in OUTCOMES, row
        assert row["served before"] == ("yes" if outcome == "already served" else "no"), row
        if row["resource"] == "*":
            continue
        kind = _served(row["API"], row["resource"])
        if outcome == "not served":
            assert kind is None, row
            continue
        assert kind is not None, row
        assert isinstance(kind, StorageOnlyStrategy) == (outcome == "served as storage"), row


def test_every_kind_served_for_upstream_is_in_the_table() -> None:
    """A kind served as storage only, or added in another group's storage, needs a row naming it."""
    needed = {(r["API"], r["resource"]) for r in _rows() if r["this change"] in ("served as storage", "served fully")}
    added = [k for k in KINDS if isinstance(k, StorageOnlyStrategy)] + list(SHARED_STORAGE)
    assert {(k.api_version, k.plural) for k in added} == needed
    assert all(k in ALL_KINDS for k in added)
