"""KindStrategy's derived names: cached per instance, yet always those of its current identity."""

from __future__ import annotations

from app.registry.base import KindStrategy, OlderVersion


class _Widgets(KindStrategy):
    group = "example.com"
    version = "v2"
    kind = "Widget"
    plural = "widgets"
    namespaced = True


def _names(strategy: KindStrategy) -> tuple[object, ...]:
    return (
        strategy.api_version,
        strategy.qualified_resource,
        strategy.list_kind,
        strategy.stored_group,
        strategy.stored_resource,
        strategy.stored_api_version,
        strategy.converts,
    )


def test_the_derived_names_of_a_kind() -> None:
    widgets = _Widgets()
    assert _names(widgets) == ("example.com/v2", "widgets.example.com", "WidgetList", "example.com", "widgets.example.com", "example.com/v2", False)


def test_a_view_in_an_older_version_has_its_own_names_and_leaves_the_kinds_alone() -> None:
    widgets = _Widgets()
    before = _names(widgets)  # cached on the instance before the view copies it
    older = widgets.at_version(OlderVersion("v1"))
    assert _names(older) == ("example.com/v1", "widgets.example.com", "WidgetList", "example.com", "widgets.example.com", "example.com/v2", True)
    assert _names(widgets) == before


def test_changing_an_identity_attribute_after_a_read_changes_the_names() -> None:
    strategy = KindStrategy()
    assert _names(strategy) == ("v1", "", "List", "", "", "v1", False)
    strategy.group = "example.com"
    strategy.kind = "Gadget"
    strategy.plural = "gadgets"
    assert _names(strategy) == ("example.com/v1", "gadgets.example.com", "GadgetList", "example.com", "gadgets.example.com", "example.com/v1", False)
    strategy.storage_group = ""
    strategy.storage_version = "v0"
    assert _names(strategy) == ("example.com/v1", "gadgets.example.com", "GadgetList", "", "gadgets", "v0", True)
