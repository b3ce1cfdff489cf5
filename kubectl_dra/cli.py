"""``kubectl dra``: devices, claims and why pods wait, as a kubectl plugin.

kubectl runs ``kubectl-dra`` from PATH for ``kubectl dra ...``. Like kubectl, it reads the
kubeconfig from ``--kubeconfig``, else the files ``KUBECONFIG`` lists, else ``~/.kube/config``;
``--context`` picks a context and ``-n/--namespace`` overrides the context's namespace. Every
read goes to the API server as the kubeconfig's user, and explanations come from the
scheduler (its URL is on the scheduler's Lease) with the same credentials. Errors are printed
and exit codes given as kubectl does (``error: ...``, ``Error from server (Reason): ...``, 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import httpx
import orjson
import yaml

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.kubeconfig import KubeconfigError, default_kubeconfig_paths, load_kubeconfig_context
from kubectl_dra import inventory, render
from kubectl_dra.dashboard.model import MAX_LISTED
from kubectl_dra.session import SCHEDULER_URL_ENV, CommandError, Session, fetch_explanation, scheduler_url

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

OUTPUTS = ("json", "yaml")
RESOURCE = "resource.k8s.io"
Obj = dict[str, Any]


class _Parser(argparse.ArgumentParser):
    """argparse with kubectl's error style and exit code."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if file is None or file is sys.stdout:  # help: a reader that is gone is no error
            write_out(message)
        else:
            super()._print_message(message, file)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message}\nSee '{self.prog} --help' for usage.\n")
        raise SystemExit(1)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # A subcommand not known is refused as kubectl refuses one.
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            sys.stderr.write(f'error: unknown command "{value}" for "{self.prog}"\nRun \'{self.prog} --help\' for usage.\n')
            raise SystemExit(1)
        super()._check_value(action, value)


def _global_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """kubectl's connection flags; accepted before and after the subcommand."""
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--kubeconfig", default=default if suppress else "", help="path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", default=default if suppress else "", help="the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default if suppress else "", help="the namespace (default: the context's)")
    parser.add_argument("--scheduler-url", default=default if suppress else os.environ.get(SCHEDULER_URL_ENV, ""),
                        help=f"the scheduler's explanation URL (default: ${SCHEDULER_URL_ENV}, else from the scheduler's Lease)")  # fmt: skip


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kubectl dra", description="See the cluster's devices, claims, and why pods wait for them.")
    _global_flags(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.set_defaults(subparsers=commands.choices)

    def command(name: str, help_text: str, examples: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=examples, formatter_class=argparse.RawDescriptionHelpFormatter)
        _global_flags(sub, suppress=True)
        return sub

    why = command("why", "Explain why a pod is not scheduled: per node, claim and request.",
                  "Examples:\n  kubectl dra why pod/training-0\n  kubectl dra why training-0 -n ml -o yaml")  # fmt: skip
    why.add_argument("target", metavar="pod/NAME", help="the pod (pod/NAME or NAME)")
    why.add_argument("-o", "--output", metavar="json|yaml", help="json or yaml (default: text)")

    devices = command("devices", "List devices: node, driver, pool, attributes, capacity used/total, claims and pods, taints, health.",
                      "Examples:\n  kubectl dra devices\n  kubectl dra devices --node sim-0 --driver gpu.example.com -o json")  # fmt: skip
    devices.add_argument("--node", default="", help="only devices of this node")
    devices.add_argument("--driver", default="", help="only devices of this driver")
    devices.add_argument("-o", "--output", metavar="json|yaml", help="json or yaml (default: a table)")

    claims = command("claims", "List resource claims: state, devices, reserved for, node.",
                     "Examples:\n  kubectl dra claims\n  kubectl dra claims -A -o yaml")  # fmt: skip
    claims.add_argument("-A", "--all-namespaces", action="store_true", help="claims of every namespace")
    claims.add_argument("-o", "--output", metavar="json|yaml", help="json or yaml (default: a table)")

    from kubectl_dra import fit as whatif  # what-if capacity (kubectl_dra.fit)

    whatif.add_arguments(
        command("fit", "How many more pods like this one fit, on which nodes and devices (asked of the scheduler; nothing is created).",
                "Examples:\n  kubectl dra fit -f pod.yaml\n  kubectl dra fit -f pod.yaml --max 50 --without-node sim-3 -o json\n"
                "  kubectl dra fit -f pod.yaml --add-nodes 2 --profile gpu"),
        command("drain-plan", "Where the pods with claims on a node would go if the node went now, and which would not fit.",
                "Examples:\n  kubectl dra drain-plan sim-3\n  kubectl dra drain-plan sim-3 -o json"),
    )  # fmt: skip

    dashboard = command("dashboard", "Serve the live device dashboard on this machine, reading as you (like kubectl proxy).",
                        "Examples:\n  kubectl dra dashboard\n  kubectl dra dashboard --port 8002")  # fmt: skip
    dashboard.add_argument("--address", default="127.0.0.1", help="address to serve on (default: 127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8001, help="port to serve on (default: 8001; 0: any free port)")
    dashboard.add_argument("--list-limit", type=_at_least_one, default=MAX_LISTED, help=f"pending pods and claims listed; the rest are counted (default: {MAX_LISTED})")
    return parser


def session_from(args: argparse.Namespace) -> Session:
    paths = [args.kubeconfig] if args.kubeconfig else default_kubeconfig_paths()
    try:
        context = load_kubeconfig_context(paths, args.context)
    except KubeconfigError as exc:
        if args.context and "no context named" in str(exc):
            raise CommandError(f'context "{args.context}" does not exist') from None
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot read the kubeconfig: {exc}") from None
    return Session(context, args.namespace or context.namespace, args.scheduler_url)


class OutputClosed(Exception):
    """Whoever reads the output went away (``kubectl dra devices | head -1``): not an error."""


def write_out(text: str) -> None:
    """``text`` on stdout, now; a reader that is gone raises :class:`OutputClosed`."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise OutputClosed from None


def emit(document: Any, output: str | None, text: Callable[[], str]) -> None:
    if output == "json":
        write_out(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif output == "yaml":
        write_out(yaml.safe_dump(document, sort_keys=False))
    else:
        write_out(text() + "\n")


def as_list(items: Sequence[Any]) -> Obj:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": list(items)}


async def list_all(client: KubeClient, group: str, plural: str, namespace: str = "") -> list[Obj]:
    return list((await client.list(resource_path(group, "v1", plural, namespace or None), limit=500)).get("items") or [])


async def list_or_warn(client: KubeClient, group: str, plural: str, what: str) -> list[Obj]:
    """A list that only adds detail: refused is a warning (kubectl's style), not a failure."""
    try:
        return await list_all(client, group, plural)
    except ApiError as exc:
        if exc.code != 403:
            raise
        print(f"Warning: {exc.message}; {what} not shown", file=sys.stderr)
        return []


# --- commands -------------------------------------------------------------------------------------


def pod_name(target: str) -> str:
    kind, slash, name = target.partition("/")
    if not slash:
        return target
    if kind.lower() not in ("pod", "pods", "po") or not name:
        raise CommandError(f'kubectl dra why explains pods: use pod/NAME, not "{target}"')
    return name


async def why(session: Session, args: argparse.Namespace) -> None:
    name = pod_name(args.target)
    async with session.client() as client:
        pod = await client.get(resource_path("", "v1", "pods", session.namespace, name))  # the server's NotFound and Forbidden
        document = await fetch_explanation(session, client, session.namespace, name)
        if inventory.waits_on_its_node(pod):  # placed, not started: what the kubelet said, as kubectl describe shows it
            failures = inventory.preparation_failures(pod, await pod_events(client, pod, inventory.FAILED_PREPARE_REASON))
            if failures:
                document = {**document, "kubeletEvents": failures}
    emit(document, args.output, lambda: render.explanation(document))


async def pod_events(client: KubeClient, pod: Obj, reason: str) -> list[Obj]:
    """The pod's events of one reason; a refusal is a warning (they only add detail)."""
    meta = pod.get("metadata") or {}
    selector = f"involvedObject.kind=Pod,involvedObject.name={meta.get('name', '')},involvedObject.uid={meta.get('uid', '')},reason={reason}"
    try:
        return list((await client.list(resource_path("", "v1", "events", meta.get("namespace", "")), field_selector=selector)).get("items") or [])
    except ApiError as exc:
        if exc.code != 403:
            raise
        print(f"Warning: {exc.message}; the kubelet's events not shown", file=sys.stderr)
        return []


async def devices(session: Session, args: argparse.Namespace) -> None:
    async with session.client() as client:
        slices = await list_all(client, RESOURCE, "resourceslices")
        claims = await list_all(client, RESOURCE, "resourceclaims")
        rules = await list_or_warn(client, RESOURCE, "devicetaintrules", "taints from DeviceTaintRules")
        pods = await list_or_warn(client, "", "pods", "device health")
    rows = [
        r for r in inventory.device_rows(slices, claims, pods, rules)
        if (not args.node or r.node == args.node) and (not args.driver or r.driver == args.driver)
    ]  # fmt: skip
    if not rows and args.output is None:
        print("No devices found.", file=sys.stderr)
        return
    emit(as_list([r.to_dict() for r in rows]), args.output, lambda: render.devices_table(rows))


async def claims(session: Session, args: argparse.Namespace) -> None:
    namespace = "" if args.all_namespaces else session.namespace
    async with session.client() as client:
        items = await list_all(client, RESOURCE, "resourceclaims", namespace)
        pods = await list_or_warn(client, "", "pods", "nodes of reserving pods") if items else []
    rows = inventory.claim_rows(items, pods)
    if not rows and args.output is None:
        where = "" if args.all_namespaces else f" in {session.namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return
    emit(as_list([r.to_dict() for r in rows]), args.output, lambda: render.claims_table(rows, args.all_namespaces))


async def dashboard(session: Session, args: argparse.Namespace) -> None:
    from kubectl_dra.dashboard.server import serve  # the web parts only when asked for

    await serve(session, args.address, args.port, args.list_limit)


async def fit(session: Session, args: argparse.Namespace) -> None:
    from kubectl_dra import fit as whatif

    if bool(args.add_nodes) != bool(args.profile):
        raise CommandError("--add-nodes and --profile go together")
    try:
        pod = whatif.read_pod(args.filename)
        namespace = (pod.get("metadata") or {}).get("namespace") or session.namespace
        async with session.client() as client:
            url = await scheduler_url(session, client)
            async with session.scheduler_client(url) as scheduler:
                answer = await whatif.ask_fit(
                    client, scheduler, url, namespace, pod, max_copies=args.max, without=args.without_node, add_nodes=args.add_nodes, profile=args.profile
                )
    except whatif.FitError as exc:
        raise CommandError(str(exc)) from None
    emit(answer, args.output, lambda: whatif.fit_text(answer))


async def drain_plan(session: Session, args: argparse.Namespace) -> None:
    from kubectl_dra import fit as whatif

    async with session.client() as client:
        url = await scheduler_url(session, client)
        async with session.scheduler_client(url) as scheduler:
            try:
                plan = await whatif.ask(scheduler, url, whatif.drain_path(args.node), {})
            except whatif.FitError as exc:
                raise CommandError(str(exc)) from None
    plan = {k: v for k, v in plan.items() if k not in ("kind", "apiVersion")}
    emit(plan, args.output, lambda: whatif.drain_text(plan))


COMMANDS: dict[str, Callable[[Session, argparse.Namespace], Coroutine[Any, Any, None]]] = {
    "why": why, "devices": devices, "claims": claims, "dashboard": dashboard, "fit": fit, "drain-plan": drain_plan,
}  # fmt: skip


def _server(session: Session) -> str:
    parts = urlsplit(session.context.connection.server)
    return parts.netloc or session.context.connection.server


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; what no flag takes is refused by the subcommand, in kubectl's words."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:  # like kubectl: the help, and success
        parser.print_help()
        raise SystemExit(0)
    if unknown:
        command: argparse.ArgumentParser = args.subparsers[args.command]
        command.error(f"unknown flag: {unknown[0]}" if unknown[0].startswith("-") else f'unexpected argument "{unknown[0]}"')
    if getattr(args, "output", None) not in (None, *OUTPUTS):
        sys.stderr.write(f'error: unable to match a printer suitable for the output format "{args.output}", allowed formats are: {",".join(OUTPUTS)}\n')
        raise SystemExit(1)
    return args


def _reader_gone() -> int:
    """End as kubectl (a Go program) ends when its output's reader is gone: killed by SIGPIPE,
    silently (the shell's status 141)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing is left to flush at exit
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + signal.SIGPIPE  # not reached


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
    except OutputClosed:
        return _reader_gone()
    try:
        session = session_from(args)
        asyncio.run(COMMANDS[args.command](session, args))
    except OutputClosed:
        return _reader_gone()
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(f"Error from server ({exc.reason or 'Unknown'}): {exc.message}", file=sys.stderr)
        return 1
    except (httpx.ConnectError, ConnectionRefusedError):
        print(f"The connection to the server {_server(session)} was refused - did you specify the right host or port?", file=sys.stderr)
        return 1
    except (httpx.TransportError, OSError) as exc:
        print(f"Unable to connect to the server: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
