"""``make protobuf-schema``: write ``app/protobuf_schema.json`` from the Go types of k8s.io/api
(``interop/protocheck schema``), compact and with sorted keys so a change reads as a small diff, then
``kube/apitypes.pyi`` (the typed dicts, ``devtools/apitypes.py``) and its run-time module from it.

``--types-only`` writes ``kube/apitypes.py`` alone from the checked-in schema (no Go needed): after
a kind's ``extra_schema_properties`` or the served kinds change."""

from __future__ import annotations

import argparse
import json
import subprocess

from app import protobuf
from devtools import apitypes, gobuild


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m devtools.protobufschema", description=__doc__)
    parser.add_argument("--types-only", action="store_true", help="write kube/apitypes.py from the checked-in schema")
    args = parser.parse_args()
    if not args.types_only:
        binary = gobuild.build_go_program(gobuild.INTEROP / "protocheck", "protocheck")
        written = subprocess.run([str(binary), "schema"], check=True, capture_output=True).stdout
        protobuf.SCHEMA_PATH.write_text(json.dumps(json.loads(written), sort_keys=True, separators=(",", ":")) + "\n")
        print(f"wrote {protobuf.SCHEMA_PATH}")
    stub, module = apitypes.render(json.loads(protobuf.SCHEMA_PATH.read_bytes()))
    apitypes.STUB_PATH.write_text(stub)
    apitypes.MODULE_PATH.write_text(module)
    print(f"wrote {apitypes.STUB_PATH} and {apitypes.MODULE_PATH}")


if __name__ == "__main__":
    main()
