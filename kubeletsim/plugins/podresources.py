"""The PodResourcesLister service of one node on ``<root>/<node>/pod-resources/kubelet.sock``.

Monitoring agents read from it which devices each container got. This node has no device
plugins, no exclusive CPUs and no memory manager, so those lists stay empty; DRA devices are
listed per container and claim with their driver, pool, device and CDI devices.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import grpc
import grpc.aio

from kube.objects import Obj
from kubeletapi.layout import check_socket_path
from kubeletapi.podresources.v1 import api_pb2 as podresources
from kubeletapi.podresources.v1 import api_pb2_grpc as podresources_grpc
from kubeletsim.plugins.manager import ContainerClaimDevices

log = logging.getLogger("kubeletsim.plugins")

ActivePods = Callable[[], list[Obj]]
DynamicResources = Callable[[Obj, Obj], list[ContainerClaimDevices]]


def _containers(pod: Obj) -> list[Obj]:
    """Sidecars (restartable init containers) and regular containers, as the kubelet lists them."""
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(spec.get("containers") or [])]


class PodResourcesServer(podresources_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    """Answers List, Get and GetAllocatableResources from the node's active pods and their prepared claims."""

    def __init__(self, socket_path: Path, active_pods: ActivePods, dynamic_resources: DynamicResources) -> None:
        self.socket_path = socket_path
        self.active_pods = active_pods
        self.dynamic_resources = dynamic_resources
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        path = check_socket_path(self.socket_path)
        if os.path.lexists(path):
            os.unlink(path)
        server = grpc.aio.server()
        podresources_grpc.add_PodResourcesListerServicer_to_server(self, server)
        server.add_insecure_port("unix:" + path)
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
            self._server = None

    def _pod_resources(self, pod: Obj) -> podresources.PodResources:
        meta = pod.get("metadata") or {}
        result = podresources.PodResources(name=meta.get("name", ""), namespace=meta.get("namespace", ""))
        for container in _containers(pod):
            entry = result.containers.add(name=container.get("name", ""))
            for claim in self.dynamic_resources(pod, container):
                dynamic = entry.dynamic_resources.add(claim_name=claim.claim_name, claim_namespace=claim.namespace)
                for driver, device in claim.devices:
                    resource = dynamic.claim_resources.add(driver_name=driver, pool_name=device.pool, device_name=device.device)
                    resource.cdi_devices.extend(podresources.CDIDevice(name=cdi) for cdi in device.cdi_device_ids)
                    if device.share_id is not None:
                        resource.share_id = device.share_id
        return result

    async def List(self, request: podresources.ListPodResourcesRequest, context: grpc.aio.ServicerContext) -> podresources.ListPodResourcesResponse:
        return podresources.ListPodResourcesResponse(pod_resources=[self._pod_resources(p) for p in self.active_pods()])

    async def Get(self, request: podresources.GetPodResourcesRequest, context: grpc.aio.ServicerContext) -> podresources.GetPodResourcesResponse:
        for pod in self.active_pods():
            meta = pod.get("metadata") or {}
            if meta.get("name") == request.pod_name and meta.get("namespace") == request.pod_namespace:
                return podresources.GetPodResourcesResponse(pod_resources=self._pod_resources(pod))
        # A plain Go error in the kubelet: status code Unknown with the error text.
        await context.abort(grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found")
        raise AssertionError("unreachable")  # abort raises

    async def GetAllocatableResources(
        self, request: podresources.AllocatableResourcesRequest, context: grpc.aio.ServicerContext
    ) -> podresources.AllocatableResourcesResponse:
        return podresources.AllocatableResourcesResponse()
