"""CEL evaluation benchmark: the project's interpreter against ``cel-expr-python`` (cel-cpp).

Microseconds of process CPU per evaluation of typical device selectors, best of ``--repeat``
rounds. Ours is measured twice: through the DRA entry point the allocator uses
(``compile_selector(...).evaluate(DeviceView)``, the view built once per device as the
allocator does) and with ``device`` declared as a plain ``map(string, dyn)`` in Kubernetes'
base environment. ``cel-expr-python`` has no custom types, so there ``device`` is the same
plain map; it runs in a child process of the interpreter given by ``--cel-expr-python``
(a separate venv, it is not a dependency of the project) and is skipped when that is absent.
Printed per selector: µs ours (DRA), µs ours (map), µs cel-expr-python, and the ratio
ours (DRA) / cel-expr-python.

Run ``python -m bench.cel --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.machine import reports_machine
from kube.cel import DYN, STRING, DeviceView, compile_selector, kubernetes_environment, map_of

DRIVER = "gpu.example.com"
SELECTORS = {
    "driver-and-model": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a100"',
    "string-match": f'device.attributes["{DRIVER}"].model.matches("^a[0-9]+$")',
    "int-compare": f'device.attributes["{DRIVER}"].cores >= 64',
    "three-clauses": f'device.driver.startsWith("gpu.") && device.attributes["{DRIVER}"].cores > 4 '
    f'&& device.attributes["{DRIVER}"].model in ["a100", "h100"]',
}
DEVICE: dict[str, Any] = {
    "driver": DRIVER,
    "attributes": {DRIVER: {"model": {"string": "a100"}, "cores": {"int": 108}}},
}
PLAIN_DEVICE: dict[str, Any] = {"driver": DRIVER, "attributes": {DRIVER: {"model": "a100", "cores": 108}}}

# Run by the other interpreter: reads {"selectors", "device", "loops", "repeat"} on stdin, prints µs per name.
CHILD = """
import json, sys, time
from cel_expr_python import cel
from cel_expr_python.ext import ext_strings
job = json.load(sys.stdin)
env = cel.NewEnv(variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}, extensions=[ext_strings.ExtStrings(2)])
out = {}
for name, expr in job["selectors"].items():
    program = env.compile(expr)
    act = env.Activation({"device": job["device"]})
    assert program.eval(act).value() is True, name
    best = float("inf")
    for _ in range(job["repeat"]):
        start = time.process_time()
        for _ in range(job["loops"]):
            program.eval(act)
        best = min(best, time.process_time() - start)
    out[name] = best / job["loops"] * 1e6
print(json.dumps(out))
"""


def per_eval(fn: Callable[[], Any], loops: int, repeat: int) -> float:
    """Best-of-``repeat`` process CPU µs per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(loops):
            fn()
        best = min(best, time.process_time() - start)
    return best / loops * 1e6


def ours(loops: int, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    view = DeviceView(DEVICE)
    env = kubernetes_environment({"device": map_of(STRING, DYN)})
    dra: dict[str, float] = {}
    plain: dict[str, float] = {}
    for name, expr in SELECTORS.items():
        selector = compile_selector(expr)
        program = env.compile(expr)
        activation = {"device": PLAIN_DEVICE}
        assert selector.evaluate(view) is True and program.evaluate(activation) is True, name
        dra[name] = per_eval(partial(selector.evaluate, view), loops, repeat)
        plain[name] = per_eval(partial(program.evaluate, activation), loops, repeat)
    return dra, plain


def cel_expr_python(python: str, loops: int, repeat: int) -> tuple[dict[str, float] | None, str]:
    if not python or not os.path.exists(python):
        return None, f"no interpreter at {python!r}"
    job = json.dumps({"selectors": SELECTORS, "device": PLAIN_DEVICE, "loops": loops, "repeat": repeat})
    proc = subprocess.run([python, "-c", CHILD], input=job, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["failed"])[-1]
    result: dict[str, float] = json.loads(proc.stdout)
    return result, ""


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=2000, help="evaluations per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best counts")
    parser.add_argument(
        "--cel-expr-python",
        default=os.environ.get("CEL_EXPR_PYTHON", "/tmp/celexpr-venv/bin/python"),
        help="a Python with cel-expr-python installed (default $CEL_EXPR_PYTHON or /tmp/celexpr-venv/bin/python)",
    )
    args = parser.parse_args(argv)
    dra, plain = ours(args.loops, args.repeat)
    other, why = cel_expr_python(args.cel_expr_python, args.loops, args.repeat)
    if other is None:
        print(f"cel-expr-python skipped: {why}")
    print(f"{'selector':18s} {'ours DRA µs':>12s} {'ours map µs':>12s} {'cel-expr µs':>12s} {'ours/cel-expr':>14s}")
    for name in SELECTORS:
        theirs = f"{other[name]:12.2f}" if other else f"{'-':>12s}"
        ratio = f"{dra[name] / other[name]:14.1f}" if other else f"{'-':>14s}"
        print(f"{name:18s} {dra[name]:12.2f} {plain[name]:12.2f} {theirs} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
