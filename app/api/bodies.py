"""Request bodies: the size limit, JSON and YAML decoding, hostile input (which decoder a
request gets is content negotiation's choice)."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from kube.errors import ApiError, bad_request, entity_too_large

MAX_DEPTH = 100
MAX_YAML_NODES = 1_000_000


async def read_body(receive: Receive, declared: str | None, limit: int) -> bytes:
    """The whole body (ASGI ``receive``), refusing anything over ``limit`` bytes without reading it all.

    ``declared`` is the Content-Length header, if any.
    """
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise entity_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise entity_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse absurd nesting before any recursive code sees it."""
    if (type(value) is dict or type(value) is list) and not _within_depth(value, limit - 1):
        raise bad_request(f"the request body is nested deeper than {limit} levels")


def _within_depth(container: dict[str, Any] | list[Any], remaining: int) -> bool:
    """Whether every value below ``container`` is at most ``remaining`` levels deeper."""
    if remaining <= 0:
        return not container
    for item in container.values() if type(container) is dict else container:
        if (type(item) is dict or type(item) is list) and not _within_depth(item, remaining - 1):
            return False
    return True


def decode_json(raw: bytes, kind: str) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {exc}") from None
    check_depth(value)
    return value


class _BoundedLoader(yaml.SafeLoader):
    """A safe YAML loader that measures the expanded document before building it."""


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # cycles count once
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo)
            if total > MAX_YAML_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, memo) + _expanded_size(v, memo)
            if total > MAX_YAML_NODES:
                break
    memo[key] = total
    return total


def decode_yaml(raw: bytes, kind: str) -> Any:
    try:
        loader = _BoundedLoader(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if _expanded_size(node, {}) > MAX_YAML_NODES:
                raise bad_request("the YAML document expands to too many nodes (aliases)")
            value = loader.construct_document(node)
        finally:
            loader.dispose()
    except ApiError:
        raise
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): error converting YAML to JSON: {exc}") from None
    # YAML may hold values JSON cannot (timestamps, binary); round-trip to find them.
    try:
        value = orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise bad_request(f"error converting YAML to JSON: {exc}") from None
    check_depth(value)
    return value
