"""``make protobuf-schema``: write ``kube/protobuf_schema.json`` from the Go types of k8s.io/api
(``interop/protocheck schema``), compact and with sorted keys so a change reads as a small diff."""

from __future__ import annotations

import json
import subprocess

from devtools import gobuild
from kube import protobuf


def main() -> None:
    binary = gobuild.build_go_program(gobuild.INTEROP / "protocheck", "protocheck")
    written = subprocess.run([str(binary), "schema"], check=True, capture_output=True).stdout
    protobuf.SCHEMA_PATH.write_text(json.dumps(json.loads(written), sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {protobuf.SCHEMA_PATH}")


if __name__ == "__main__":
    main()
