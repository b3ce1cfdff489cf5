"""Field errors rendered as apimachinery renders them."""

from __future__ import annotations

from kube.errors import too_many


def test_too_many_says_the_count_and_the_limit_as_apimachinery_does() -> None:
    assert too_many("spec.x", 33, 32).message == "Too many: 33: must have at most 32 items"
    assert too_many("spec.x", 2, 1).message == "Too many: 2: must have at most 1 item"
    assert too_many("spec.x", -1, 4).message == "Too many: must have at most 4 items"
    assert too_many("spec.x", 5, -1).message == "Too many: 5: has too many items"
