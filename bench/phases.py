"""The API benchmark's measured phases: closed loops of requests against one server and one raw
baseline, and the watch latency."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from bench.common import (
    ERROR_PAUSE,
    JSON,
    MAX_OPS_PER_PHASE,
    NS_CRUD,
    NS_LIST,
    NS_WATCH,
    PROTOBUF,
    REQUEST_TIMEOUT,
    PhaseResult,
    claim,
    claim_bytes,
    claims_path,
    ms,
    now,
    percentile,
)
from bench.cpu import CpuMeter
from bench.rawdb import RawDB
from bench.transport import ApiClient, Watcher, close_all, make_clients

# ----------------------------------------------------------------------------- measurement loop

Op = Callable[[], Awaitable[str]]


@dataclass
class LoopStats:
    """Raw outcome of a closed loop."""

    outcomes: Counter[str]
    latencies: list[float]
    elapsed: float


async def closed_loop(ops: list[Op], duration: float, max_ops: int = MAX_OPS_PER_PHASE) -> LoopStats:
    """Run each op back-to-back in its own task for ``duration`` seconds (and at most ``max_ops`` in total).

    An op returns "ok", "conflict" or an error label; only "ok" ops count towards latency.
    """
    outcomes: Counter[str] = Counter()
    latencies: list[float] = []
    issued = 0
    start = now()
    deadline = start + duration

    async def worker(op: Op) -> None:
        nonlocal issued
        while issued < max_ops:
            t0 = now()
            if t0 >= deadline:
                return
            issued += 1
            try:
                out = await op()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                out = f"exception:{type(e).__name__}"
            t1 = now()
            outcomes[out] += 1
            if out == "ok":
                latencies.append(t1 - t0)
            elif out != "conflict":
                await asyncio.sleep(ERROR_PAUSE)

    tasks = [asyncio.create_task(worker(op)) for op in ops]
    _done, pending = await asyncio.wait(tasks, timeout=duration + REQUEST_TIMEOUT + 5)
    for t in pending:
        t.cancel()
        outcomes["timeout"] += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    return LoopStats(outcomes, latencies, now() - start)


def status_label(status: int, want: int) -> str:
    """Outcome label of an HTTP status."""
    if status == want:
        return "ok"
    if status == 409:
        return "conflict"
    return f"http:{status}"


# ----------------------------------------------------------------------------- the benchmark


@dataclass
class Options:
    """Parsed command line."""

    clients: list[int]
    duration: float
    warmup: float
    list_size: int
    watchers: int
    watch_rate: float
    watch_duration: float
    client_kind: str
    phases: set[str]
    headers: dict[str, str]
    server_args: list[str]
    ssl_context: ssl.SSLContext | None = None  # HTTPS clients (--against-upstream: both servers, client certificates)
    protobuf: bool = False  # request and response bodies in Kubernetes' protobuf instead of JSON


class Bench:
    """Runs every phase against one server and one raw baseline and collects the results."""

    def __init__(
        self,
        opts: Options,
        base_url: str,
        raw: RawDB | None,
        cpu: CpuMeter,
    ) -> None:
        self.o = opts
        self.base_url = base_url
        self.raw = raw
        self.cpu = cpu
        self.results: list[PhaseResult] = []
        self.created: list[str] = []
        self.raw_names: list[str] = []
        self.raw_ids: list[int] = []
        self.serial = itertools.count()
        self.tag = f"{int(time.time()) % 1_000_000:06d}"
        self.notes: list[str] = []
        # What makes the run's figures untrue (main exits non-zero): e.g. a LIST answered short.
        self.failures: list[str] = []
        # Bodies as the server is asked to take and give them: JSON, or protobuf (app/protobuf.py).
        self.media_type = PROTOBUF if opts.protobuf else JSON
        self.encode: Callable[[dict[str, Any]], bytes] = orjson.dumps
        self.decode: Callable[[bytes], Any] = orjson.loads
        if opts.protobuf:
            from app import protobuf

            self.encode, self.decode = protobuf.encode_object, protobuf.decode_object

    def list_items(self, body: bytes) -> int:
        """How many items a LIST answer holds, counted without decoding them (a full decode of
        every measured LIST would cost the client more CPU than the server spends on it): in
        JSON each claim has one ``"uid":`` (the benchmark's claims have no owner references), in
        protobuf each item is one field 2 of the list message."""
        if self.media_type == JSON:
            return body.count(b'"uid":')
        from app import protobuf

        _, _, raw = protobuf.open_envelope(body)
        return sum(1 for number, *_ in protobuf._fields(raw, 0, len(raw), "list") if number == 2)

    def claim_body(self, name: str, namespace: str, seq: int) -> bytes:
        """:func:`claim` in the phase's media type."""
        return self.encode(claim(name, namespace, seq))

    # --------------------------------------------------------------- helpers

    def clients(self, n: int) -> list[ApiClient]:
        """Fresh client connections for a phase."""
        return make_clients(self.o.client_kind, self.base_url, n, self.o.headers, self.o.ssl_context, self.media_type)

    async def prime(self, clients: list[ApiClient]) -> None:
        """Open every connection before the clock starts."""
        await asyncio.gather(*(c.request("GET", "/readyz") for c in clients))

    async def measure(
        self, phase: str, side: str, n: int, make_ops: Callable[[], list[Op]], extra: dict[str, Any] | None = None
    ) -> PhaseResult:
        """Warm up, then run a measured closed loop and record the result."""
        if self.o.warmup > 0:
            await closed_loop(make_ops(), self.o.warmup)
        ops = make_ops()
        self.cpu.start()
        st = await closed_loop(ops, self.o.duration)
        cpu = self.cpu.stop()
        ok = st.outcomes.pop("ok", 0)
        conflicts = st.outcomes.pop("conflict", 0)
        res = PhaseResult(
            phase=phase,
            side=side,
            clients=n,
            ok=ok,
            elapsed_s=round(st.elapsed, 3),
            rate=round(ok / st.elapsed, 1) if st.elapsed > 0 else 0.0,
            p50_ms=ms(percentile(st.latencies, 50)),
            p99_ms=ms(percentile(st.latencies, 99)),
            conflicts=conflicts,
            errors=dict(st.outcomes),
            cpu_cores=cpu,
            extra=extra or {},
        )
        self.results.append(res)
        print(
            f"  {side:6s} {phase:7s} c={n:<3d} {res.rate:>9.1f}/s  p50 {res.p50_ms} ms  p99 {res.p99_ms} ms"
            f"  conflicts {conflicts}  errors {res.errors or 0}  cpu {cpu}",
            flush=True,
        )
        return res

    async def ensure_namespaces(self) -> None:
        """Create the benchmark namespaces (409 = already there)."""
        [c] = self.clients(1)
        try:
            for ns in (NS_CRUD, NS_LIST, NS_WATCH):
                body = self.encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                status, data = await c.request("POST", "/api/v1/namespaces", body)
                if status not in (200, 201, 409):
                    raise RuntimeError(f"creating namespace {ns}: HTTP {status} {data[:300]!r}")
            status, data = await c.request("POST", claims_path(NS_CRUD), self.claim_body(f"probe-{self.tag}", NS_CRUD, 0))
            if status not in (201, 409):
                raise RuntimeError(f"creating a ResourceClaim: HTTP {status} {data[:500]!r}")
            if status == 201:
                self.created.append(f"probe-{self.tag}")
        finally:
            await close_all([c])

    async def create_many(self, namespace: str, prefix: str, count: int, conc: int = 16) -> list[str]:
        """Create ``count`` claims (bounded: 120 s); returns the names created."""
        clients = self.clients(conc)
        names: list[str] = []
        todo = iter(range(count))
        deadline = now() + 120

        async def worker(c: ApiClient) -> None:
            for i in todo:
                if now() > deadline:
                    return
                name = f"{prefix}-{i}"
                status, _ = await c.request("POST", claims_path(namespace, None), self.claim_body(name, namespace, i))
                if status in (201, 409):
                    names.append(name)

        try:
            await asyncio.gather(*(worker(c) for c in clients))
        finally:
            await close_all(clients)
        return names

    # --------------------------------------------------------------- server phases

    async def server_create(self, n: int) -> None:
        """POST claims back-to-back."""
        clients = self.clients(n)
        await self.prime(clients)

        def make_ops() -> list[Op]:
            # Unique across calls: bench.profile runs the phase twice against one server.
            round_ = next(self.serial)

            def op_for(w: int, c: ApiClient) -> Op:
                seq = 0

                async def op() -> str:
                    nonlocal seq
                    seq += 1
                    name = f"c{self.tag}-{n}-{round_}-{w}-{seq}"
                    status, _ = await c.request("POST", claims_path(NS_CRUD), self.claim_body(name, NS_CRUD, seq))
                    if status == 201:
                        self.created.append(name)
                    return status_label(status, 201)

                return op

            return [op_for(w, c) for w, c in enumerate(clients)]

        try:
            await self.measure("create", "server", n, make_ops)
        finally:
            await close_all(clients)

    async def server_update(self, n: int) -> None:
        """PUT claims with the resourceVersion of the previous response (each client owns its objects)."""
        per_client = 4
        want = n * per_client
        if len(self.created) < want:
            self.created += await self.create_many(NS_CRUD, f"u{self.tag}-{n}", want - len(self.created))
        names = self.created[:want]
        clients = self.clients(n)
        await self.prime(clients)
        objs: dict[str, dict[str, Any]] = {}

        async def refresh(c: ApiClient, name: str) -> None:
            status, data = await c.request("GET", claims_path(NS_CRUD, name))
            if status == 200:
                objs[name] = self.decode(data)

        try:
            for i in range(0, len(names), n):
                await asyncio.gather(*(refresh(clients[j % n], nm) for j, nm in enumerate(names[i : i + n])))

            def op_for(w: int, c: ApiClient) -> Op:
                mine = [nm for nm in names[w::n] if nm in objs]
                k = 0

                async def op() -> str:
                    nonlocal k
                    if not mine:
                        return "no-objects"
                    name = mine[k % len(mine)]
                    k += 1
                    obj = objs[name]
                    obj["metadata"].setdefault("annotations", {})["bench.example.com/seq"] = str(k)
                    status, data = await c.request("PUT", claims_path(NS_CRUD, name), self.encode(obj))
                    if status == 200:
                        objs[name] = self.decode(data)
                    elif status == 409:
                        await refresh(c, name)
                    return status_label(status, 200)

                return op

            await self.measure("update", "server", n, lambda: [op_for(w, c) for w, c in enumerate(clients)])
        finally:
            await close_all(clients)

    async def server_get(self, n: int) -> None:
        """GET random existing claims."""
        if not self.created:
            self.created += await self.create_many(NS_CRUD, f"g{self.tag}-{n}", 1000)
        clients = self.clients(n)
        await self.prime(clients)
        pool = self.created[:100_000]

        def op_for(c: ApiClient, rng: random.Random) -> Op:
            async def op() -> str:
                status, _ = await c.request("GET", claims_path(NS_CRUD, rng.choice(pool)))
                return status_label(status, 200)

            return op

        try:
            await self.measure("get", "server", n, lambda: [op_for(c, random.Random(w)) for w, c in enumerate(clients)])
        finally:
            await close_all(clients)

    async def prepare_list(self) -> None:
        """Create ``list_size`` claims in the list namespace and check a LIST returns them."""
        [c] = self.clients(1)
        try:
            status, data = await c.request("GET", claims_path(NS_LIST))
            have = len(self.decode(data).get("items") or []) if status == 200 else 0
            if have < self.o.list_size:
                await self.create_many(NS_LIST, "l", self.o.list_size)
                status, data = await c.request("GET", claims_path(NS_LIST))
                have = len(self.decode(data).get("items") or []) if status == 200 else 0
            if have != self.o.list_size:
                self.notes.append(f"LIST returned {have} items, expected {self.o.list_size} (HTTP {status})")
        finally:
            await close_all([c])

    async def server_list(self, n: int) -> None:
        """LIST the namespace holding ``list_size`` claims."""
        clients = self.clients(n)
        await self.prime(clients)
        sizes: list[int] = []
        # Items per answer of every LIST, one tally per make_ops() call (the warm-up's, then the
        # measured loop's): a short 200 is not a LIST of list_size.
        tallies: list[Counter[int]] = []

        def make_ops() -> list[Op]:
            tallies.append(Counter())
            return [op_for(c, tallies[-1]) for c in clients]

        def op_for(c: ApiClient, returned: Counter[int]) -> Op:
            async def op() -> str:
                status, data = await c.request("GET", claims_path(NS_LIST))
                if status != 200:
                    return status_label(status, 200)
                items = self.list_items(data)
                returned[items] += 1
                if len(sizes) < 1000:
                    sizes.append(len(data))
                return "ok" if items == self.o.list_size else "short"

            return op

        try:
            result = await self.measure("list", "server", n, make_ops, {"objects_per_list": self.o.list_size})
            returned = tallies[-1]
            result.extra["objects_per_list"] = sorted(returned) if len(returned) != 1 else next(iter(returned))
            if sizes:
                result.extra["bytes_per_list"] = int(sum(sizes) / len(sizes))
            if short := sum(count for items, count in returned.items() if items != self.o.list_size):
                got = ", ".join(f"{count} x {items}" for items, count in sorted(returned.items()) if items != self.o.list_size)
                self.failures.append(f"LIST at {n} clients: {short} of {sum(returned.values())} answers held fewer or more than {self.o.list_size} items ({got})")
        finally:
            await close_all(clients)

    # --------------------------------------------------------------- raw phases

    async def raw_phases(self, n: int) -> None:
        """Raw statements at concurrency ``n``: insert, update, get by name, select 1,000 rows."""
        raw = self.raw
        if raw is None:
            return
        await raw.open(n)
        try:
            if "create" in self.o.phases or "update" in self.o.phases or "get" in self.o.phases:

                def insert_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        seq = 0

                        async def op() -> str:
                            nonlocal seq
                            seq += 1
                            name = f"r{n}-{w}-{seq}-{next(self.serial)}"
                            row_id = await raw.insert(w, name, claim_bytes(name, NS_CRUD, seq).decode())
                            self.raw_names.append(name)
                            self.raw_ids.append(row_id)
                            return "ok"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("create", "raw", n, insert_ops)
            if "update" in self.o.phases and self.raw_ids:
                ids = self.raw_ids[: n * 4]

                def update_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        mine = ids[w::n] or ids
                        k = 0

                        async def op() -> str:
                            nonlocal k
                            k += 1
                            await raw.update(w, mine[k % len(mine)], claim_bytes(f"u-{k}", NS_CRUD, k).decode())
                            return "ok"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("update", "raw", n, update_ops)
            if "get" in self.o.phases and self.raw_names:
                pool = self.raw_names[:100_000]

                def get_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        rng = random.Random(w)

                        async def op() -> str:
                            return "ok" if await raw.get(w, rng.choice(pool)) is not None else "missing"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("get", "raw", n, get_ops)
            if "list" in self.o.phases:
                docs = [(f"l-{i}", claim_bytes(f"l-{i}", NS_LIST, i).decode()) for i in range(self.o.list_size)]
                await raw.fill_list_table(docs)

                def list_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        async def op() -> str:
                            return "ok" if await raw.list_all(w) == self.o.list_size else "short"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("list", "raw", n, list_ops, {"objects_per_list": self.o.list_size})
        finally:
            await raw.close()

    # --------------------------------------------------------------- watch

    async def watch_latency(self) -> dict[str, Any]:
        """W watchers on the claims collection; a writer creates claims at a fixed rate."""
        o = self.o
        [c] = self.clients(1)
        try:
            status, data = await c.request("GET", claims_path(NS_WATCH) + "?limit=1")
            if status != 200:
                raise RuntimeError(f"LIST {NS_WATCH}: HTTP {status} {data[:300]!r}")
            rv = orjson.loads(data)["metadata"]["resourceVersion"]
        finally:
            await close_all([c])
        path = claims_path(NS_WATCH) + f"?watch=true&resourceVersion={rv}"
        prefix = f"w-{self.tag}-{rv}-"
        watchers = [Watcher(f'"name":"{prefix}'.encode()) for _ in range(o.watchers)]
        stream_deadline = now() + o.watch_duration + 60
        tasks = [
            asyncio.create_task(w.run(o.client_kind, self.base_url, path, o.headers, stream_deadline, o.ssl_context)) for w in watchers
        ]
        result: dict[str, Any] = {"watchers": o.watchers, "target_rate": o.watch_rate, "duration_s": o.watch_duration}
        writers = self.clients(min(64, max(16, int(o.watch_rate / 20))))
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    await asyncio.gather(*(w.connected.wait() for w in watchers))
            bad = [w for w in watchers if w.status != 200]
            if bad:
                result["watch_errors"] = sorted({f"{w.status} {w.error or ''}".strip() for w in bad})
            await self.prime(writers)
            await asyncio.sleep(0.5)
            resp_at: dict[bytes, float] = {}
            free: asyncio.Queue[ApiClient] = asyncio.Queue()
            for wc in writers:
                free.put_nowait(wc)
            outcomes: Counter[str] = Counter()
            write_lat: list[float] = []

            async def write(i: int) -> None:
                wc = await free.get()
                name = f"{prefix}{i}"
                t0 = now()
                try:
                    st, _ = await wc.request("POST", claims_path(NS_WATCH), claim_bytes(name, NS_WATCH, i))
                    t1 = now()
                    outcomes[status_label(st, 201)] += 1
                    if st == 201:
                        resp_at[name.encode()] = t1
                        write_lat.append(t1 - t0)
                except Exception as e:
                    outcomes[f"exception:{type(e).__name__}"] += 1
                finally:
                    free.put_nowait(wc)

            total = int(o.watch_rate * o.watch_duration)
            pending: list[asyncio.Task[None]] = []
            self.cpu.start()
            t_start = now()
            launched = 0
            while launched < total and now() < t_start + o.watch_duration + 30:
                due = min(total, int((now() - t_start) * o.watch_rate) + 1)
                while launched < due:
                    pending.append(asyncio.create_task(write(launched)))
                    launched += 1
                delay = t_start + launched / o.watch_rate - now()
                await asyncio.sleep(max(0.0, delay))
            write_elapsed = now() - t_start
            _done, late = await asyncio.wait(pending, timeout=REQUEST_TIMEOUT) if pending else (set(), set())
            for t in late:
                t.cancel()
            ok = len(resp_at)
            expected = ok * sum(1 for w in watchers if w.status == 200)
            drain_deadline = now() + 15
            while now() < drain_deadline:
                got = sum(sum(1 for nm, _ in w.arrivals if nm in resp_at) for w in watchers)
                if got >= expected:
                    break
                await asyncio.sleep(0.1)
            result["cpu_cores"] = self.cpu.stop()
            lat = [t - resp_at[nm] for w in watchers for nm, t in w.arrivals if nm in resp_at]
            result.update(
                writes_ok=ok,
                write_errors={k: v for k, v in outcomes.items() if k != "ok"},
                achieved_rate=round(ok / write_elapsed, 1) if write_elapsed > 0 else 0.0,
                write_p50_ms=ms(percentile(write_lat, 50)),
                write_p99_ms=ms(percentile(write_lat, 99)),
                events_expected=expected,
                events_received=len(lat),
                events_before_response=sum(1 for v in lat if v < 0),
                p50_ms=ms(percentile(lat, 50)),
                p90_ms=ms(percentile(lat, 90)),
                p99_ms=ms(percentile(lat, 99)),
                max_ms=ms(max(lat) if lat else None),
                event_types=dict(sum((w.types for w in watchers), Counter())),
            )
            errs = sorted({w.error for w in watchers if w.error})
            if errs:
                result["stream_errors"] = errs[:5]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await close_all(writers)
        print(f"  watch: {result}", flush=True)
        return result
