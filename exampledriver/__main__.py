"""``python -m exampledriver``: an example DRA driver, written in Python, for the simulator's nodes.

For every node it serves, it publishes a ResourceSlice through the API, registers with the
kubelet (the simulator) through ``<root>/<node>/plugins_registry`` and serves
NodePrepareResources, NodeUnprepareResources and NodeWatchResources on
``<root>/<node>/plugins/<driver>/dra.sock``. See exampledriver.driver for what it does.

Its flags follow upstream's example driver (kubernetes-sigs/dra-example-driver) where they
mean the same: ``--node-name``, ``--num-devices``, ``--cdi-root``,
``--kubelet-registrar-directory-path``, ``--kubelet-plugins-directory-path``, ``--kubeconfig``
and ``--kube-api-qps``, with the same environment variables for the node-side ones. One
process may serve many nodes (``--nodes``), each in ``--kubelet-root-dir``'s layout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import httpx

from exampledriver.driver import DEFAULT_DRIVER, SLICES, NodeDriver
from exampledriver.kubeletplugin import PluginServer
from kube.client import resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.logs import setup_logging
from kube.process import LOG_LEVELS, add_connection_arguments, client_from_args
from kube.tasks import wait_for
from kubeletapi.layout import DEFAULT_ROOT_DIR, NodeDirs

log = logging.getLogger("exampledriver")


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "")
    return Path(value) if value else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m exampledriver", description=__doc__.splitlines()[0] if __doc__ else None)
    add_connection_arguments(parser)
    parser.add_argument("--kube-api-qps", dest="qps", type=float, default=0.0, help="client-side rate limit for API requests; 0: none")
    parser.add_argument("--driver-name", default=DEFAULT_DRIVER, help=f"the DRA driver name (default {DEFAULT_DRIVER})")
    parser.add_argument(
        "--node-name",
        action="append",
        default=[],
        help="a node to serve (repeatable or comma-separated; env NODE_NAME); default: --nodes nodes named like the simulator's",
    )
    parser.add_argument("--nodes", type=int, default=10, help="serve <prefix>0 .. <prefix>N-1 when no --node-name is given (default 10)")
    parser.add_argument("--node-prefix", default="sim-", help="node name prefix for --nodes (default sim-)")
    parser.add_argument(
        "--kubelet-root-dir", type=Path, default=Path(os.environ.get("DRA_KUBELET_ROOT_DIR", str(DEFAULT_ROOT_DIR))),
        help=f"the simulator's --root-dir; node N uses <dir>/N (default {DEFAULT_ROOT_DIR}; env DRA_KUBELET_ROOT_DIR)",
    )  # fmt: skip
    parser.add_argument(
        "--kubelet-registrar-directory-path", type=Path, default=_env_path("KUBELET_REGISTRAR_DIRECTORY_PATH"),
        help="one node only: where the kubelet watches registration sockets (env KUBELET_REGISTRAR_DIRECTORY_PATH)",
    )  # fmt: skip
    parser.add_argument(
        "--kubelet-plugins-directory-path", type=Path, default=_env_path("KUBELET_PLUGINS_DIRECTORY_PATH"),
        help="one node only: the kubelet's plugins directory (env KUBELET_PLUGINS_DIRECTORY_PATH)",
    )  # fmt: skip
    parser.add_argument(
        "--cdi-root", type=Path, default=_env_path("CDI_ROOT"),
        help="where CDI spec files go: the directory itself for one node, <dir>/<node> for several (env CDI_ROOT; default <root>/<node>/cdi)",
    )  # fmt: skip
    parser.add_argument(
        "--num-devices", "--devices", dest="devices", type=int, default=int(os.environ.get("NUM_DEVICES", "8")),
        help="devices per node (default 8; env NUM_DEVICES)",
    )  # fmt: skip
    parser.add_argument("--fail-prepare", default="", metavar="MESSAGE", help="fail every preparation with MESSAGE")
    parser.add_argument("--unhealthy", action="append", default=[], metavar="NODE/DEVICE", help="report a device unhealthy (repeatable)")
    parser.add_argument("--resync-interval", type=float, default=10.0, help="seconds between ResourceSlice checks (default 10)")
    parser.add_argument("--log-level", default=os.environ.get("DRA_LOG_LEVEL", "info"), choices=LOG_LEVELS)
    return parser


def node_names(args: argparse.Namespace) -> list[str]:
    names = [n for value in args.node_name or [os.environ.get("NODE_NAME", "")] for n in value.split(",") if n]
    return names or [f"{args.node_prefix}{i}" for i in range(args.nodes)]


def cdi_dir(args: argparse.Namespace, dirs: NodeDirs, several: bool) -> Path:
    if args.cdi_root is None:
        return dirs.base / "cdi"
    return args.cdi_root / dirs.node if several else args.cdi_root


async def run(args: argparse.Namespace) -> None:
    nodes = node_names(args)
    # Absolute paths: the endpoint announced at registration is dialled from the kubelet's directory, not ours.
    root = args.kubelet_root_dir.absolute()
    async with client_from_args(args, user_agent="exampledriver/0.1") as client:
        drivers: dict[str, NodeDriver] = {}
        servers: list[PluginServer] = []
        for node in nodes:
            dirs = NodeDirs(root, node)
            registry = (args.kubelet_registrar_directory_path or dirs.registry).absolute()
            plugins = (args.kubelet_plugins_directory_path or dirs.plugins).absolute()
            unhealthy = [d.split("/", 1)[1] for d in args.unhealthy if d.split("/", 1)[0] == node]
            driver = NodeDriver(
                client, args.driver_name, node, cdi_dir(args, dirs, len(nodes) > 1).absolute(), devices=args.devices,
                fail_prepare=args.fail_prepare, unhealthy=unhealthy,
            )  # fmt: skip
            server = PluginServer(args.driver_name, registry_dir=registry, plugin_dir=plugins / args.driver_name, node=driver, health=driver)
            drivers[node] = driver
            servers.append(server)
        claims = Informer(client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims")
        # Our own slices: one that goes away (a kubelet wipes them when it starts) is published again at once.
        slices = Informer(client, SLICES, field_selector=f"spec.driver={args.driver_name}", name="resourceslices")
        republish = asyncio.Event()

        async def claim_updated(_old: dict, new: dict) -> None:
            for driver in drivers.values():
                await driver.claim_changed(new)

        def slice_deleted(obj: dict) -> None:
            if (obj.get("spec") or {}).get("nodeName") in drivers:
                republish.set()

        claims.on_update(claim_updated)
        slices.on_delete(slice_deleted)
        claims.start()
        slices.start()
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, lambda: main.cancel() if main else None)
        try:
            for server in servers:
                await server.start()
            log.info("started", extra={"driver": args.driver_name, "nodes": len(nodes), "root": str(root), "server": client.server})
            while True:
                republish.clear()
                for driver in drivers.values():
                    try:
                        await driver.publish()
                    except (ApiError, httpx.HTTPError) as exc:
                        level = logging.DEBUG if isinstance(exc, ApiError) and exc.code == 404 else logging.WARNING
                        log.log(level, "cannot publish the ResourceSlice yet", extra={"node": driver.node, "error": str(exc)})
                with contextlib.suppress(TimeoutError):
                    await wait_for(republish.wait(), args.resync_interval)
        except asyncio.CancelledError:
            log.info("stopping")
        finally:
            # Removing the registration sockets deregisters the plugins.
            for server in servers:
                await server.stop()
            await claims.stop()
            await slices.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if len(node_names(args)) != 1 and (args.kubelet_registrar_directory_path or args.kubelet_plugins_directory_path):
        log.error("--kubelet-registrar-directory-path and --kubelet-plugins-directory-path need exactly one node")
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
