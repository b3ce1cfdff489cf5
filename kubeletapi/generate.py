"""Regenerate (or, with ``--check``, verify) the Python stubs of the kubelet plugin protos.

``python -m kubeletapi.generate`` runs grpcio-tools' protoc on every ``api.proto`` of this
package and writes ``api_pb2.py``, ``api_pb2.pyi`` and ``api_pb2_grpc.py`` beside it.
``--check`` generates into a scratch directory and exits 1 listing the files that differ.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# Protos are compiled relative to the directory above the package, so the generated modules
# import each other as ``kubeletapi.<api>.<version>.api_pb2``.
SOURCE_ROOT = PACKAGE_DIR.parent
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files() -> list[Path]:
    """Every proto of the package, in a stable order."""
    return sorted(PACKAGE_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Compile every proto into ``out_dir`` (mirroring the source layout); return the written files."""
    from grpc_tools import protoc  # only needed to generate: a test dependency, not a runtime one

    protos = [str(p.relative_to(SOURCE_ROOT)) for p in proto_files()]
    args = ["protoc", f"-I{SOURCE_ROOT}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed on " + ", ".join(protos))
    return sorted(p for p in out_dir.rglob("*") if p.name.endswith(GENERATED_SUFFIXES))


def stale_files() -> list[str]:
    """Generated files (relative to the source root) whose checked-in text differs from a fresh run."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = {str(p.relative_to(scratch)): p.read_bytes() for p in generate(Path(scratch))}
    current = {str(p.relative_to(SOURCE_ROOT)): p.read_bytes() for p in PACKAGE_DIR.rglob("*") if p.name.endswith(GENERATED_SUFFIXES)}
    return sorted(name for name in fresh.keys() | current.keys() if fresh.get(name) != current.get(name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeletapi.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report generated files that are out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for name in stale:
            print(f"out of date: {name}", file=sys.stderr)
        return 1 if stale else 0
    for path in generate(SOURCE_ROOT):
        print(path.relative_to(SOURCE_ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
