"""``python -m exampledriver``: an example DRA driver, written in Python, for the simulator's nodes.

For every node it serves, it publishes a ResourceSlice through the API, registers with the
kubelet (the simulator) through ``<root>/<node>/plugins_registry`` and serves
NodePrepareResources, NodeUnprepareResources and NodeWatchResources on
``<root>/<node>/plugins/<driver>/dra.sock``. See exampledriver.driver for what it does.
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

from exampledriver.driver import DEFAULT_DRIVER, NodeDriver
from exampledriver.kubeletplugin import PluginServer
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.logs import setup_logging
from kubeletapi.layout import DEFAULT_ROOT_DIR, NodeDirs

log = logging.getLogger("exampledriver")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m exampledriver", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server", default=os.environ.get("DRA_SERVER", "http://127.0.0.1:6443"), help="API server URL (env DRA_SERVER)")
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
        "--kubelet-root-dir", type=Path, default=DEFAULT_ROOT_DIR, help=f"the simulator's --root-dir; node N uses <dir>/N (default {DEFAULT_ROOT_DIR})"
    )
    parser.add_argument(
        "--kubelet-registrar-directory-path", type=Path, help="one node only: where the kubelet watches registration sockets"
    )
    parser.add_argument("--kubelet-plugins-directory-path", type=Path, help="one node only: the kubelet's plugins directory")
    parser.add_argument("--devices", type=int, default=8, help="devices per node (default 8)")
    parser.add_argument("--fail-prepare", default="", metavar="MESSAGE", help="fail every preparation with MESSAGE")
    parser.add_argument("--unhealthy", action="append", default=[], metavar="NODE/DEVICE", help="report a device unhealthy (repeatable)")
    parser.add_argument("--resync-interval", type=float, default=10.0, help="seconds between ResourceSlice checks (default 10)")
    parser.add_argument("--log-level", default=os.environ.get("DRA_LOG_LEVEL", "info"), choices=["debug", "info", "warning", "error"])
    return parser


def node_names(args: argparse.Namespace) -> list[str]:
    names = [n for value in args.node_name or [os.environ.get("NODE_NAME", "")] for n in value.split(",") if n]
    return names or [f"{args.node_prefix}{i}" for i in range(args.nodes)]


async def run(args: argparse.Namespace) -> None:
    nodes = node_names(args)
    async with KubeClient(args.server, user_agent="exampledriver/0.1") as client:
        drivers: list[NodeDriver] = []
        servers: list[PluginServer] = []
        for node in nodes:
            dirs = NodeDirs(args.kubelet_root_dir, node)
            registry = args.kubelet_registrar_directory_path or dirs.registry
            plugins = args.kubelet_plugins_directory_path or dirs.plugins
            unhealthy = [d.split("/", 1)[1] for d in args.unhealthy if d.split("/", 1)[0] == node]
            driver = NodeDriver(
                client, args.driver_name, node, dirs.base / "cdi", devices=args.devices, fail_prepare=args.fail_prepare, unhealthy=unhealthy
            )
            server = PluginServer(args.driver_name, registry_dir=registry, plugin_dir=plugins / args.driver_name, node=driver, health=driver)
            drivers.append(driver)
            servers.append(server)
        claims = Informer(client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims")

        async def claim_updated(_old: dict, new: dict) -> None:
            for driver in drivers:
                await driver.claim_changed(new)

        claims.on_update(claim_updated)
        claims.start()
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, lambda: main.cancel() if main else None)
        try:
            for server in servers:
                await server.start()
            log.info("started", extra={"driver": args.driver_name, "nodes": len(nodes), "root": str(args.kubelet_root_dir)})
            while True:
                for driver in drivers:
                    try:
                        await driver.publish()
                    except (ApiError, httpx.HTTPError) as exc:
                        level = logging.DEBUG if isinstance(exc, ApiError) and exc.code == 404 else logging.WARNING
                        log.log(level, "cannot publish the ResourceSlice yet", extra={"node": driver.node, "error": str(exc)})
                await asyncio.sleep(args.resync_interval)
        except asyncio.CancelledError:
            log.info("stopping")
        finally:
            # Removing the registration sockets deregisters the plugins.
            for server in servers:
                await server.stop()
            await claims.stop()


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
