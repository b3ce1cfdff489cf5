"""The plugin watcher against drivers served over real unix sockets with the project's generated stubs."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from kube.tasks import wait_for
from kubeletapi.layout import NodeDirs
from kubeletapi.versions import DRA_V1, DRA_V1BETA1, HEALTH_V1
from kubeletsim.plugins.draplugin import DriverNotRegistered, PluginStore
from kubeletsim.plugins.registration import PluginWatcher, ScanTicker, Timeouts
from tests.kubeletsim.fakeplugin import FakeDriver, short_root


async def start_driver_process(dirs: NodeDirs) -> asyncio.subprocess.Process:
    """The fake driver in a process of its own, so a test can kill it like a crash would."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.kubeletsim.fakeplugin", str(dirs.root), dirs.node, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert await wait_for(proc.stdout.readline(), 30) == b"ready\n"
    return proc


FAST = Timeouts(dial=1.0, get_info=1.0, notify=1.0, monitor_interval=0.2, monitor_call=0.5, backoff_initial=0.05, backoff_max=0.2)


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def watching(reserved: tuple[str, ...] = ()) -> AsyncIterator[tuple[NodeDirs, PluginStore, PluginWatcher]]:
    dirs = NodeDirs(short_root(), "n0")
    dirs.create()
    store = PluginStore("n0", reserved=reserved)
    watcher = PluginWatcher(dirs, store, interval=0.02, timeouts=FAST)
    task = asyncio.create_task(watcher.run())
    try:
        yield dirs, store, watcher
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.close()


async def test_registration_negotiates_v1_and_notifies_the_driver() -> None:
    async with watching() as (dirs, store, _), FakeDriver(dirs, health=True) as driver:
        await eventually(lambda: store.registered("fake.example.com"))
        plugin = store.get("fake.example.com")
        assert (plugin.service, plugin.health_service, plugin.endpoint) == (DRA_V1, HEALTH_V1, str(driver.server.plugin_socket))
        await eventually(lambda: driver.server.registration_status is not None)
        status = driver.server.registration_status
        assert status is not None and status.plugin_registered and status.error == ""
        await eventually(lambda: store.usable("fake.example.com"))


async def test_a_v1beta1_only_driver_is_called_through_v1beta1() -> None:
    async with watching() as (dirs, store, _), FakeDriver(dirs, serve_v1=False) as driver:
        await eventually(lambda: store.registered("fake.example.com"))
        plugin = store.get("fake.example.com")
        assert plugin.service == DRA_V1BETA1 and plugin.health_service is None
        from kubeletapi.dra.v1 import api_pb2 as dra_v1

        response = await plugin.node_prepare_resources([dra_v1.Claim(namespace="ns", name="c", uid="uid-1")])
        assert list(response.claims["uid-1"].devices[0].cdi_device_ids) == ["fake.example.com/device=dev-c-uid-1"]
        assert driver.node.prepare_calls == [[("ns", "c", "uid-1")]]


async def test_removing_the_socket_deregisters_and_a_restart_registers_again() -> None:
    async with watching() as (dirs, store, _):
        async with FakeDriver(dirs):
            await eventually(lambda: store.registered("fake.example.com"))
        await eventually(lambda: not store.registered("fake.example.com"))
        with pytest.raises(DriverNotRegistered, match=r"^DRA driver fake\.example\.com is not registered$"):
            store.get("fake.example.com")
        async with FakeDriver(dirs) as again:
            await eventually(lambda: store.registered("fake.example.com"))
            await eventually(lambda: again.server.registration_status is not None)


async def test_a_killed_driver_is_deregistered_by_the_monitor_and_comes_back() -> None:
    async with watching() as (dirs, store, _):
        driver = await start_driver_process(dirs)
        await eventually(lambda: store.registered("fake.example.com"))
        # SIGKILL leaves the sockets behind: only the connection monitor can notice.
        driver.kill()
        await driver.wait()
        assert (dirs.registry / "fake.example.com-reg.sock").is_socket()
        await eventually(lambda: not store.registered("fake.example.com"))
        restarted = await start_driver_process(dirs)
        try:
            await eventually(lambda: store.registered("fake.example.com"))
        finally:
            restarted.kill()
            await restarted.wait()


async def test_unsupported_versions_are_refused_with_upstreams_message() -> None:
    async with watching() as (dirs, store, _), FakeDriver(dirs, supported_versions=["v1alpha4.NodeService"]) as driver:
        await eventually(lambda: driver.server.registration_status is not None)
        status = driver.server.registration_status
        assert status is not None and not status.plugin_registered
        assert status.error == (
            "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin "
            f"fake.example.com at endpoint {driver.server.plugin_socket}: none of services supported by the plugin "
            '(["v1alpha4.NodeService"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])'
        )
        assert not store.registered("fake.example.com")


async def test_a_second_plugin_on_the_same_endpoint_is_refused() -> None:
    async with watching() as (dirs, store, _), FakeDriver(dirs) as first:
        await eventually(lambda: store.registered("fake.example.com"))
        # Another registration socket that claims the first plugin's endpoint.
        impostor = FakeDriver(dirs, endpoint=str(first.server.plugin_socket))
        impostor.server.registration_socket = dirs.registry / "impostor-reg.sock"
        async with impostor:
            await eventually(lambda: impostor.server.registration_status is not None)
        status = impostor.server.registration_status
        assert status is not None and not status.plugin_registered
        assert status.error == (
            "RegisterPlugin error -- plugin registration failed with err: "
            f"endpoint {first.server.plugin_socket} already registered for DRA driver plugin fake.example.com"
        )
        assert [p.endpoint for p in store.plugins()] == [str(first.server.plugin_socket)]


async def test_a_name_of_a_built_in_driver_is_refused() -> None:
    async with watching(reserved=("fake.example.com",)) as (dirs, store, _), FakeDriver(dirs) as driver:
        await eventually(lambda: driver.server.registration_status is not None)
        status = driver.server.registration_status
        assert status is not None and not status.plugin_registered
        assert "DRA driver fake.example.com is simulated by a built-in profile on node n0" in status.error
        assert not store.registered("fake.example.com")


async def test_a_socket_that_is_not_a_grpc_server_does_not_disturb_others(caplog: pytest.LogCaptureFixture) -> None:
    async with watching() as (dirs, store, _):
        path = dirs.registry / "junk.sock"
        junk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        junk.bind(str(path))
        junk.listen()
        try:

            async def answer_garbage() -> None:
                loop = asyncio.get_running_loop()
                junk.setblocking(False)
                while True:
                    conn, _ = await loop.sock_accept(junk)
                    await loop.sock_sendall(conn, b"HTTP/1.0 400 not grpc\r\n\r\n")
                    conn.close()

            server = asyncio.create_task(answer_garbage())
            async with FakeDriver(dirs):
                await eventually(lambda: store.registered("fake.example.com"))
            await eventually(lambda: any(getattr(r, "socket", None) == str(path) for r in caplog.records))
            failure = next(r for r in caplog.records if getattr(r, "socket", None) == str(path))
            assert failure.levelname == "ERROR" and failure.getMessage() == "plugin registration failed"
            assert str(failure.error).startswith(f"RegisterPlugin error -- dial failed at socket {path}")  # type: ignore[attr-defined]
            assert store.drivers() == []
            server.cancel()
        finally:
            junk.close()
            os.unlink(path)


async def test_a_watcher_without_plugins_walks_its_registry_only_when_a_directory_changes() -> None:
    # A simulator runs thousands of nodes, most without plugins: a directory walk per node and
    # second was a sixth of its CPU. A stat of each directory says whether a walk can find anything.
    dirs = NodeDirs(short_root(), "n0")
    dirs.create()
    watcher = PluginWatcher(dirs, PluginStore("n0"), interval=0.02, timeouts=FAST)
    assert watcher.due()
    await watcher.scan()
    await watcher.scan()  # the second pass stamps the directories the first one walked
    assert not watcher.due()
    vendor = dirs.registry / "vendor"
    vendor.mkdir()
    assert watcher.due()
    await watcher.scan()
    await watcher.scan()
    assert not watcher.due()
    (vendor / "plugin.sock").write_bytes(b"")  # in a subdirectory: that directory changed
    assert watcher.due()


async def test_watchers_on_one_ticker_register_each_nodes_own_plugins() -> None:
    root = short_root()
    ticker = ScanTicker(0.02)
    watchers, stores, tasks = [], [], []
    for node in ("n0", "n1"):
        dirs = NodeDirs(root, node)
        dirs.create()
        stores.append(PluginStore(node))
        watchers.append(PluginWatcher(dirs, stores[-1], interval=0.02, timeouts=FAST))
        tasks.append(asyncio.create_task(watchers[-1].run(ticker)))
    tasks.append(asyncio.create_task(ticker.run()))
    try:
        await eventually(lambda: all(not w.due() for w in watchers))  # settled: nothing to walk
        async with FakeDriver(NodeDirs(root, "n1")):
            await eventually(lambda: stores[1].registered("fake.example.com"))
            assert not stores[0].registered("fake.example.com")
        await eventually(lambda: not stores[1].registered("fake.example.com"))  # the socket went: deregistered
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for store in stores:
            await store.close()
