"""Render ``kube/apitypes.py``: a ``TypedDict`` for every message the served kinds are made of.

The source is ``app/protobuf_schema.json``, which ``interop/protocheck schema`` reads from the Go
types of k8s.io/api (their ``json`` and ``protobuf`` tags), so the JSON names and types here are the
Go types' and ``tests/interop/test_protobuf_go.py`` checks the document against them. To those the
renderer adds what the kinds declare beyond the v1.37 Go types (``KindStrategy.extra_schema_properties``:
the project's own alpha fields), so each field of the API is declared once and the typed dicts follow.

The classes are ``total=False``: a key Go always writes may still be missing from what a client sends
or an older server stored, so every read of a key says how it copes with its absence. A Go pointer,
slice or map written without ``omitempty`` is JSON ``null`` when unset, and typed so (``| None``).
``make protobuf-schema`` writes the module; ``tests/devtools/test_apitypes.py`` checks it is current.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping
from typing import Any

from app import protobuf

# The typed dicts are the shared library's (kube/); the schema they are made from is the server's (app/).
MODULE_PATH = protobuf.SCHEMA_PATH.parents[1] / "kube" / "apitypes.py"
STUB_PATH = MODULE_PATH.with_suffix(".pyi")

# The JSON form of the types the codec handles by name (interop/protocheck/schema.go's specialTypes).
_SPECIAL = {
    "time": "str",
    "microtime": "str",
    "duration": "str",
    "fieldsv1": "dict[str, Any]",
    "quantity": "str",
    "intorstring": "int | str",
    "rawextension": "Any",
}
_SCALARS = {
    "string": "str",
    "bool": "bool",
    "int32": "int",
    "int64": "int",
    "uint32": "int",
    "uint64": "int",
    "float32": "float",
    "float64": "float",
    "bytes": "str",  # base64 in JSON
}
# Where two served messages share a Go type name, the one of the first package here keeps the bare
# name; the others are prefixed with their group and version (``EventsV1Event``).
_PREFERRED_PACKAGES = ("k8s.io/apimachinery/pkg/apis/meta/v1", "k8s.io/api/resource/v1", "k8s.io/api/core/v1")
# JSON Schema types of the kinds' extra properties.
_JSON_SCHEMA_TYPES = {"boolean": "bool", "string": "str", "integer": "int", "number": "float"}
_DEFINITION_PREFIXES = (("io.k8s.api.", "k8s.io/api/"), ("io.k8s.apimachinery.pkg.apis.meta.", "k8s.io/apimachinery/pkg/apis/meta/"))


def message_of_definition(name: str) -> str:
    """The Go message name (``k8s.io/api/resource/v1.AllocationResult``) of an OpenAPI definition name
    (``io.k8s.api.resource.v1.AllocationResult``)."""
    for openapi, go in _DEFINITION_PREFIXES:
        if name.startswith(openapi):
            package, _, type_name = name[len(openapi) :].rpartition(".")
            return go + package.replace(".", "/") + "." + type_name
    raise ValueError(f"no Go package for definition {name}")


def _qualifier(package: str) -> str:
    """``k8s.io/api/events/v1`` -> ``EventsV1``; ``.../apis/meta/v1`` -> ``MetaV1``."""
    group, version = package.rstrip("/").split("/")[-2:]
    return "".join(part[:1].upper() + part[1:] for part in (group, version))


class _Renderer:
    def __init__(self, schema: Mapping[str, Any], kinds: Iterable[str], extra: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        self.messages: Mapping[str, list[dict[str, Any]]] = schema["messages"]
        self.kind_messages = {schema["kinds"][key]: key.rsplit("/", 1)[1] for key in kinds}
        self.extra = {message_of_definition(name): dict(props) for name, props in extra.items()}
        self.reached: list[str] = []
        seen: set[str] = set()
        for message in sorted(self.kind_messages):
            self._reach(message, seen)
        self.names = self._names()

    def _reach(self, message: str, seen: set[str]) -> None:
        if message in seen:
            return
        seen.add(message)
        for field in self.messages[message] or ():
            if field.get("message"):
                self._reach(field["message"], seen)
        for prop in self.extra.get(message, {}).values():
            ref = _schema_ref(prop)
            if ref:
                self._reach(message_of_definition(ref), seen)
        self.reached.append(message)

    def _names(self) -> dict[str, str]:
        by_name: dict[str, list[str]] = {}
        for message in self.reached:
            by_name.setdefault(message.rsplit(".", 1)[1], []).append(message)
        names: dict[str, str] = {}
        for bare, messages in by_name.items():
            if len(messages) == 1:
                names[messages[0]] = bare
                continue
            ranked = sorted(messages, key=lambda m: (_rank(m), m))
            keeper = ranked[0] if _rank(ranked[0]) < len(_PREFERRED_PACKAGES) else None
            for message in messages:
                names[message] = bare if message == keeper else _qualifier(message.rsplit(".", 1)[0]) + bare
        if len(set(names.values())) != len(names):
            raise ValueError("two messages render to one class name")
        return names

    def _element(self, field: Mapping[str, Any]) -> str:
        kind = field["type"]
        if kind == "message":
            return self.names[field["message"]]
        if kind in _SPECIAL:
            return _SPECIAL[kind]
        return _SCALARS[kind]

    def _annotation(self, field: Mapping[str, Any]) -> str:
        element = self._element(field)
        if field.get("wrapped"):
            element = f"list[{element}]"
        label = field["label"]
        if label == "list":
            annotation, nullable = f"list[{element}]", True
        elif label == "map":
            annotation, nullable = f"dict[str, {element}]", True
        else:
            annotation, nullable = element, bool(field.get("pointer"))
        if nullable and not field.get("omitempty") and not field.get("omitzero") and annotation != "Any":
            annotation += " | None"  # Go writes a nil pointer, slice or map as null
        return annotation

    def _extra_annotation(self, prop: Mapping[str, Any]) -> str:
        ref = _schema_ref(prop)
        if ref:
            return self.names[message_of_definition(ref)]
        types = prop.get("type")
        names = [types] if isinstance(types, str) else list(types or [])
        rendered = [_JSON_SCHEMA_TYPES[t] for t in names if t != "null"]
        if len(rendered) != 1:
            raise ValueError(f"cannot type the extra property {prop}")
        return rendered[0]

    def _ordered(self) -> list[str]:
        """Messages with the messages they inline (their base classes) first."""
        done: set[str] = set()
        out: list[str] = []

        def visit(message: str) -> None:
            if message in done:
                return
            done.add(message)
            for field in self.messages[message] or ():
                if field.get("inline"):
                    visit(field["message"])
            out.append(message)

        for message in sorted(self.reached, key=lambda m: self.names[m]):
            visit(message)
        return out

    def render(self) -> tuple[str, str]:
        body: list[str] = []
        for message in self._ordered():
            fields = self.messages[message] or []
            name = self.names[message]
            bases = [self.names[f["message"]] for f in fields if f.get("inline")]
            entries: list[tuple[str, str]] = []
            if message in self.kind_messages:
                entries += [("apiVersion", "str"), ("kind", "str")]
            entries += [(f["json"], self._annotation(f)) for f in fields if not f.get("inline")]
            entries += [(key, self._extra_annotation(prop)) for key, prop in sorted(self.extra.get(message, {}).items())]
            body.append("")
            if all(key.isidentifier() and not keyword.iskeyword(key) for key, _ in entries):
                body += [f"class {name}({', '.join([*(bases or ['TypedDict']), 'total=False'])}):", f'    """{message}"""', ""]
                body += [f"    {key}: {annotation}" for key, annotation in entries] or ["    pass"]
            elif not bases:
                # A key that is a Python keyword (ListMeta's "continue") needs the functional form.
                body += [f"# {message}", f"{name} = TypedDict(", f'    "{name}",', "    {"]
                body += [f'        "{key}": {annotation},' for key, annotation in entries]
                body += ["    },", "    total=False,", ")"]
            else:
                raise ValueError(f"{message}: a key that is not an identifier in a message that inlines another")
        stub = [
            '"""The API\'s shape as typed dicts (generated by ``make protobuf-schema`` from ``protobuf_schema.json``,',
            "which is read from the Go types; ``devtools/apitypes.py``). Do not edit by hand.\"\"\"",
            "",
            "from typing import Any, TypedDict",
            *body,
        ]
        names = sorted(self.names.values())
        runtime = [
            '"""The API\'s shape as typed dicts: one ``TypedDict`` per message of the served kinds (k8s.io/api',
            "v0.37.2 and the project\'s own fields), generated by ``make protobuf-schema`` (``devtools/apitypes.py``)",
            "from ``protobuf_schema.json``, which is read from the Go types. Do not edit by hand.",
            "",
            "The classes are in ``apitypes.pyi``, for the type checker: objects stay plain dicts, cast where they",
            "come from JSON (``cast(ResourceClaim, obj)``), and mypy checks every key read or written after that.",
            "At run time every name here is ``dict``, so importing the module costs nothing (creating the classes",
            "would cost about a tenth of a second).",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "_NAMES = frozenset(",
            "    (",
            *(f'        "{name}",' for name in names),
            "    )",
            ")",
            "",
            "",
            "def __getattr__(name: str) -> type:",
            "    if name in _NAMES:",
            "        return dict",
            '    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")',
        ]
        return "\n".join(stub).rstrip("\n") + "\n", "\n".join(runtime) + "\n"


def _schema_ref(prop: Mapping[str, Any]) -> str | None:
    ref = prop.get("$ref") or next((s.get("$ref") for s in prop.get("allOf") or () if s.get("$ref")), None)
    return str(ref).removeprefix("#/$defs/") if ref else None


def _rank(message: str) -> int:
    package = message.rsplit(".", 1)[0]
    return _PREFERRED_PACKAGES.index(package) if package in _PREFERRED_PACKAGES else len(_PREFERRED_PACKAGES)


def _stored_kinds_renderer(schema: Mapping[str, Any]) -> _Renderer:
    from app.server import stored_kinds_shape

    stored, extra = stored_kinds_shape()
    kinds = [kind + suffix for kind in stored for suffix in ("", "List")]
    return _Renderer(schema, [k for k in kinds if k in schema["kinds"]], extra)


def render(schema: Mapping[str, Any]) -> tuple[str, str]:
    """The stub's and the module's text for the kinds this server stores (and their lists), from ``schema``."""
    return _stored_kinds_renderer(schema).render()


def typed_messages(schema: Mapping[str, Any]) -> dict[str, bool]:
    """The messages the typed dicts declare (Go names), each with whether it is a kind's."""
    renderer = _stored_kinds_renderer(schema)
    return {message: message in renderer.kind_messages for message in renderer.reached}
