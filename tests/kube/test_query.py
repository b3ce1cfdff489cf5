"""Query strings are split the way urllib splits them (the server parses them itself), and a
repeated key keeps its first value, as upstream's parameter codec does."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from kube.query import query_params


@pytest.mark.parametrize(
    "query",
    [
        b"",
        b"watch=true",
        b"watch=true&resourceVersion=12&allowWatchBookmarks=true",
        b"labelSelector=app%3Dweb%2Ctier%21%3Ddb&limit=500",
        b"fieldSelector=spec.nodeName%3Dnode-1",
        b"a=1&a=2",
        b"flag&x=",
        b"&&x=1&",
        b"x=a=b",
        b"name=hello+world",
        b"dryRun=All&fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
        "n=\u00e9".encode(),
    ],
)
def test_query_params_match_urllib(query: bytes) -> None:
    expected: dict[str, str] = {}
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        expected.setdefault(key, value)
    assert query_params(query) == expected


def test_repeated_key_keeps_first_value() -> None:
    assert query_params(b"limit=1&limit=7") == {"limit": "1"}
    assert query_params(b"labelSelector=a%3Db&labelSelector=c") == {"labelSelector": "a=b"}
