"""The checked-in stubs are what the protos generate, and they speak upstream's wire names."""

from __future__ import annotations

from kubeletapi import generate
from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletapi.dra.v1beta1 import api_pb2 as dra_v1beta1
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.dra_health.v1alpha1 import api_pb2 as health_v1alpha1
from kubeletapi.pluginregistration.v1 import api_pb2 as registration
from kubeletapi.podresources.v1 import api_pb2 as podresources


def test_checked_in_stubs_match_the_protos() -> None:
    assert generate.stale_files() == [], "run `python -m kubeletapi.generate` and commit the result"


def test_services_have_upstreams_full_names() -> None:
    # These names are on the wire (the HTTP/2 path of every call); a driver built on upstream's
    # helper only answers to exactly these.
    services = {
        registration.DESCRIPTOR.services_by_name["Registration"].full_name,
        dra_v1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
        dra_v1beta1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
        health_v1.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name,
        health_v1alpha1.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name,
        podresources.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name,
    }
    assert services == {
        "pluginregistration.Registration",
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
        "v1.PodResourcesLister",
    }


def test_v1beta1_messages_read_v1_bytes() -> None:
    """v1beta1 is v1 without share_id: the kubelet converts between them by field number."""
    device = dra_v1.Device(request_names=["gpu"], pool_name="node-0", device_name="gpu-1", cdi_device_ids=["example.com/gpu=gpu-1"], share_id="s")
    response = dra_v1.NodePrepareResourcesResponse(claims={"uid-1": dra_v1.NodePrepareResourceResponse(devices=[device])})
    old = dra_v1beta1.NodePrepareResourcesResponse.FromString(response.SerializeToString())
    assert old.claims["uid-1"].devices[0].cdi_device_ids == ["example.com/gpu=gpu-1"]
