"""Which DeviceClass serves an extended resource (the rule the scheduler and resource quota share)."""

from __future__ import annotations

from kube.dra.extendedresources import class_resources, is_dra_extended_resource_name, resource_classes
from kube.objects import Obj

GPU = "example.com/gpu"


def klass(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z") -> Obj:
    spec: Obj = {"selectors": []}
    if resource:
        spec["extendedResourceName"] = resource
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def test_a_class_serves_its_explicit_and_implicit_names() -> None:
    mapping = resource_classes([klass("gpu", GPU), klass("nic")])
    assert mapping == {GPU: "gpu", "deviceclass.resource.kubernetes.io/gpu": "gpu", "deviceclass.resource.kubernetes.io/nic": "nic"}


def test_colliding_names_go_to_the_newest_class_then_the_first_name() -> None:
    old, new = klass("old", GPU, "2026-01-01T00:00:00Z"), klass("new", GPU, "2026-02-01T00:00:00Z")
    assert resource_classes([new, old])[GPU] == "new"
    assert resource_classes([old, new])[GPU] == "new"
    b, a = klass("b", GPU, "2026-02-01T00:00:00Z"), klass("a", GPU, "2026-02-01T00:00:00Z")
    assert resource_classes([b, a, old])[GPU] == "a"


def test_each_class_keeps_the_name_it_gives_even_when_another_wins_it() -> None:
    old, new = klass("old", GPU, "2026-01-01T00:00:00Z"), klass("new", GPU, "2026-02-01T00:00:00Z")
    assert class_resources([old, new, klass("plain")]) == {"old": GPU, "new": GPU}


def test_extended_resource_names() -> None:
    assert is_dra_extended_resource_name(GPU)
    assert is_dra_extended_resource_name("deviceclass.resource.kubernetes.io/gpu")
    assert not is_dra_extended_resource_name("cpu")
    assert not is_dra_extended_resource_name("hugepages-2Mi")
    assert not is_dra_extended_resource_name("example.kubernetes.io/thing")
    assert not is_dra_extended_resource_name("requests.example.com/gpu")
