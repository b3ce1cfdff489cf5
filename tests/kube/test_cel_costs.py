"""Estimated and actual costs of the Kubernetes CEL libraries, as upstream's library cost tests
state them (an environment with the Kubernetes libraries, strings v2, sets, optionals and
two-variable comprehensions, presence tests free, no constant folding)."""

from __future__ import annotations

import pytest

from kube.cel import (
    Environment,
    estimate_call_cost,
    kubernetes,
    optionals,
    runtime_cost_rule,
    sets,
    standard,
    strings,
    two_var_comprehensions,
)
from kube.cel.cost import AstNode, Estimate
from kube.cel.types import BYTES as BYTES_T
from kube.cel.types import STRING

INTS = "[1, 2, 3, 4, 5]"
UINTS = "[uint(1), uint(2), uint(3), uint(4), uint(5)]"
DOUBLES = "[1.0, 2.0, 3.0, 4.0, 5.0]"
BOOLS = "[false, true, false, true, false]"
STRINGS = "['012345678901', '012345678901', '012345678901', '012345678901', '012345678901']"
BYTES = "[bytes('012345678901'), bytes('012345678901'), bytes('012345678901'), bytes('012345678901'), bytes('012345678901')]"
DURATIONS = "[duration('1s'), duration('2s'), duration('3s'), duration('4s'), duration('5s')]"
TIMESTAMPS = (
    "[timestamp('2011-01-01T00:00:00.000+01:00'), timestamp('2011-01-02T00:00:00.000+01:00'), "
    "timestamp('2011-01-03T00:00:00.000+01:00'), timestamp('2011-01-04T00:00:00.000+01:00'), "
    "timestamp('2011-01-05T00:00:00.000+01:00')]"
)
LONG_STRING = "'01234567890123456789012345678901234567890123456789'"
IPV4, IPV6 = "ip('192.168.0.1')", "ip('2001:db8:3333:4444:5555:6666:7777:8888')"
CIDR4, CIDR6 = "cidr('192.168.0.0/16')", "cidr('2001:db8::/32')"

# (expression, estimated min, estimated max, actual)
CASES: list[tuple[str, int, int, int]] = [
    *[(f"{INTS}{op}", 15, 15, 15) for op in (".sum()", ".isSorted()", ".max()", ".min()")],
    *[(f"{UINTS}{op}", 20, 20, 20) for op in (".sum()", ".isSorted()", ".max()", ".min()")],
    *[(f"{DOUBLES}{op}", 15, 15, 15) for op in (".sum()", ".isSorted()", ".max()", ".min()")],
    *[(f"{DURATIONS}{op}", 20, 20, 20) for op in (".sum()", ".isSorted()", ".max()", ".min()")],
    *[(f"{BOOLS}{op}", 15, 15, 15) for op in (".isSorted()", ".max()", ".min()")],
    *[(f"{STRINGS}{op}", 15, 25, 15) for op in (".isSorted()", ".max()", ".min()")],
    *[(f"{BYTES}{op}", 25, 35, 25) for op in (".isSorted()", ".max()", ".min()")],
    *[(f"{TIMESTAMPS}{op}", 20, 20, 20) for op in (".isSorted()", ".max()", ".min()")],
    *[(f"{INTS}.{f}(3)", 15, 15, 15) for f in ("indexOf", "lastIndexOf")],
    *[(f"{UINTS}.{f}(uint(3))", 21, 21, 21) for f in ("indexOf", "lastIndexOf")],
    *[(f"{DOUBLES}.{f}(3.0)", 15, 15, 15) for f in ("indexOf", "lastIndexOf")],
    *[(f"{BOOLS}.{f}(true)", 15, 15, 15) for f in ("indexOf", "lastIndexOf")],
    *[(f"{STRINGS}.{f}('x')", 15, 25, 15) for f in ("indexOf", "lastIndexOf")],
    *[(f"{BYTES}.{f}(bytes('x'))", 26, 36, 26) for f in ("indexOf", "lastIndexOf")],
    *[(f"{DURATIONS}.{f}(duration('3s'))", 21, 21, 21) for f in ("indexOf", "lastIndexOf")],
    *[(f"{TIMESTAMPS}.{f}(timestamp('2011-01-03T00:00:00.000+01:00'))", 21, 21, 21) for f in ("indexOf", "lastIndexOf")],
    *[(f"{LONG_STRING}.{f}('123')", 5, 5, 5) for f in ("indexOf", "lastIndexOf")],
    *[
        (f"url('https:://kubernetes.io/'){op}", 4, 4, 4)
        for op in (".getScheme()", ".getHostname()", ".getHost()", ".getPort()", ".getEscapedPath()", ".getQuery()")
    ],
    ("url('https:://kubernetes.io/') == url('https:://kubernetes.io/')", 7, 9, 7),
    ("url('https:://kubernetes.io/') == url('http://x.b')", 5, 5, 5),
    (IPV4, 2, 2, 2),
    (IPV6, 4, 4, 4),
    *[
        (f"{IPV4}{op}", 3, 3, 3)
        for op in (
            ".family()",
            ".isUnspecified()",
            ".isLoopback()",
            ".isLinkLocalMulticast()",
            ".isLinkLocalUnicast()",
            ".isGlobalUnicast()",
        )
    ],
    *[
        (f"{IPV6}{op}", 5, 5, 5)
        for op in (
            ".family()",
            ".isUnspecified()",
            ".isLoopback()",
            ".isLinkLocalMulticast()",
            ".isLinkLocalUnicast()",
            ".isGlobalUnicast()",
        )
    ],
    (f"{IPV4} == ip('192.168.0.1')", 5, 5, 5),
    (f"{IPV6} == ip('192.168.0.1')", 7, 7, 7),
    ("ip.isCanonical('192.168.0.1')", 3, 3, 3),
    ("ip.isCanonical('2001:db8:3333:4444:5555:6666:7777:8888')", 8, 8, 8),
    ("ip.isCanonical('2001:db8::abcd')", 3, 3, 3),
    (CIDR4, 2, 2, 2),
    (CIDR6, 2, 2, 2),
    *[(f"{CIDR4}{op}", 3, 3, 3) for op in (".ip()", ".prefixLength()", ".masked()")],
    *[(f"{CIDR6}{op}", 3, 3, 3) for op in (".ip()", ".prefixLength()", ".masked()")],
    (f"{CIDR4} == cidr('2001:db8::/32')", 5, 5, 5),
    *[
        (f"{CIDR4}.containsCIDR({o})", 7, 11, 7)
        for o in ("cidr('192.0.0.0/30')", "cidr('192.168.0.0/16')", "'192.0.0.0/30'", "'192.168.0.0/16'")
    ],
    *[(f"{CIDR4}.containsIP({o})", 4, 7, 4) for o in ("ip('192.0.0.1')", "'192.0.0.1'")],
    *[(f"{CIDR4}.containsIP({o})", 5, 8, 5) for o in ("ip('192.169.0.1')", "ip('192.169.169.250')", "'192.169.0.1'")],
    *[(f"{CIDR6}.containsCIDR({o})", 7, 11, 7) for o in ("cidr('2001:db8::/126')", "cidr('2001:db8::/32')", "'2001:db8::/126'")],
    *[
        (f"{CIDR6}.containsIP({o})", 7, 10, 7)
        for o in ("ip('2001:db8:3333:4444:5555:6666:7777:8888')", "'2001:db8:3333:4444:5555:6666:7777:8888'")
    ],
    *[(f"{CIDR6}.containsIP({o})", 5, 8, 5) for o in ("ip('2001:db8::1')", "'2001:db8::1'")],
    ("'ABCDEFGHIJ abcdefghij'.lowerAscii()", 3, 3, 3),
    ("'ABCDEFGHIJ abcdefghij'.lowerAscii() == 'abcdefghij ABCDEFGHIJ'.lowerAscii()", 7, 9, 9),
    ("'ABCDEFGHIJ abcdefghij'.upperAscii()", 3, 3, 3),
    ("'ABCDEFGHIJ abcdefghij'.upperAscii() == 'abcdefghij ABCDEFGHIJ'.upperAscii()", 7, 9, 9),
    ("strings.quote('ABCDEFGHIJ abcdefghij')", 3, 3, 3),
    ("strings.quote('ABCDEFGHIJ abcdefghij') == strings.quote('ABCDEFGHIJ abcdefghij')", 7, 11, 9),
    ("'abc 123 def 123'.replace('123', '456')", 3, 3, 3),
    ("'abc 123 def 123'.replace('', 'x')", 3, 3, 3),
    ("'abc 123 def 123'.replace('123', '')", 3, 3, 3),
    ("'abc 123 def 123'.replace('123', '456', 1)", 3, 3, 3),
    ("'abc 123 def 123'.split(' ')", 3, 3, 3),
    ("'abc 123 def 123'.split(' ', 1)", 3, 3, 3),
    ("'abc 123 def 123'.substring(5)", 2, 2, 2),
    ("'abc 123 def 123'.substring(5, 8)", 2, 2, 2),
    ("'  abc 123 def 123  '.trim()", 2, 2, 2),
    ("['aa', 'bb', 'cc', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join(' ')", 11, 23, 15),
    ("['aa', 'bb', 'cc', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join()", 10, 22, 13),
    ("'abc 123 def 123'.find('123')", 2, 2, 2),
    ("'abc 123 def 123'.findAll('123')", 2, 2, 2),
    ("'abc 123 def 123'.findAll('123', 1)", 2, 2, 2),
    ('quantity("12Mi")', 1, 1, 1),
    ('isQuantity("20")', 1, 1, 1),
    ('isQuantity("20M")', 1, 1, 1),
    ('quantity("200M") == quantity("200M")', 3, 3, 3),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', 3, 6, 6),
    ('quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")', 3, 9, 9),
    ('quantity("50M").isLessThan(quantity("50Mi"))', 3, 3, 3),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', 3, 3, 3),
    ('quantity("200M").compareTo(quantity("0.2G")) > 0', 4, 4, 4),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', 5, 5, 5),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', 5, 5, 5),
    ('quantity("50k").sub(20) == quantity("49980")', 4, 4, 4),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger() > 0', 6, 6, 6),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() > 0', 7, 7, 7),
    ('quantity("50k").asInteger() > 0', 3, 3, 3),
    ('quantity("50").isInteger()', 2, 2, 2),
    ('quantity("50.703k").asApproximateFloat() > 0.0', 3, 3, 3),
    ('format.named("dns1123subdomain")', 1, 1, 1),
    ('format.named("dns1123Subdomain").value().validate("my-name")', 34, 34, 17),
    ('format.named("dns1123Label").value().validate("my-name")', 34, 34, 10),
    ('format.named("dns1123Label").value() == format.named("dns1123Label").value()', 5, 11, 5),
    ("sets.contains([], [])", 21, 21, 21),
    ("sets.contains([1], [])", 21, 21, 21),
    ("sets.contains([1], [1])", 22, 22, 22),
    ("sets.contains([1], [1, 1])", 23, 23, 23),
    ("sets.contains([1, 1], [1])", 23, 23, 23),
    ("sets.contains([2, 1], [1])", 23, 23, 23),
    ("sets.contains([1, 2, 3, 4], [2, 3])", 29, 29, 29),
    ("sets.contains([1], [1.0, 1])", 23, 23, 23),
    ("sets.contains([1, 2], [2u, 2.0])", 25, 25, 25),
    ("sets.contains([1, 2u], [2, 2.0])", 25, 25, 25),
    ("sets.contains([1, 2.0, 3u], [1.0, 2u, 3])", 30, 30, 30),
    ("sets.contains([[1], [2, 3]], [[2, 3.0]])", 53, 53, 53),
    ("!sets.contains([1], [2])", 23, 23, 23),
    ("!sets.contains([1], [1, 2])", 24, 24, 24),
    ('!sets.contains([1], ["1", 1])', 24, 24, 24),
    ("!sets.contains([1], [1.1, 1u])", 24, 24, 24),
    ("sets.equivalent([], [])", 21, 21, 21),
    ("sets.equivalent([1], [1])", 23, 23, 23),
    ("sets.equivalent([1], [1, 1])", 25, 25, 25),
    ("sets.equivalent([1, 1], [1])", 25, 25, 25),
    ("sets.equivalent([1], [1u, 1.0])", 25, 25, 25),
    ("sets.equivalent([1, 2, 3], [3u, 2.0, 1])", 39, 39, 39),
    ("sets.equivalent([[1.0], [2, 3]], [[1], [2, 3.0]])", 69, 69, 69),
    ("!sets.equivalent([2, 1], [1])", 26, 26, 26),
    ("!sets.equivalent([1], [1, 2])", 26, 26, 26),
    ("!sets.equivalent([1, 2], [2u, 2, 2.0])", 34, 34, 34),
    ("!sets.equivalent([1, 2], [1u, 2, 2.3])", 34, 34, 34),
    ("sets.intersects([1], [1])", 22, 22, 22),
    ("sets.intersects([1], [1, 1])", 23, 23, 23),
    ("sets.intersects([1, 1], [1])", 23, 23, 23),
    ("sets.intersects([2, 1], [1])", 23, 23, 23),
    ("sets.intersects([1], [1, 2])", 23, 23, 23),
    ("sets.intersects([1], [1.0, 2])", 23, 23, 23),
    ("sets.intersects([1, 2], [2u, 2, 2.0])", 27, 27, 27),
    ("sets.intersects([1, 2], [1u, 2, 2.3])", 27, 27, 27),
    ("sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]])", 65, 65, 65),
    ("!sets.intersects([], [])", 22, 22, 22),
    ("!sets.intersects([1], [])", 22, 22, 22),
    ("!sets.intersects([1], [2])", 23, 23, 23),
    ('!sets.intersects([1], ["1", 2])', 24, 24, 24),
    ("!sets.intersects([1], [1.1, 2u])", 24, 24, 24),
    ('semver("1.0.0")', 1, 1, 1),
    ('semver("1234.56789012345.67890123456789")', 4, 4, 4),
    ('isSemver("1.0.0")', 1, 1, 1),
    ('isSemver("1234.56789012345.67890123456789")', 4, 4, 4),
    ('semver("1.2.3").major()', 2, 2, 2),
    ('semver("1.2.3").minor()', 2, 2, 2),
    ('semver("1.2.3").patch()', 2, 2, 2),
    ('semver("1.0.0").isLessThan(semver("1.1.0"))', 3, 3, 3),
    ('semver("1.1.0").isGreaterThan(semver("1.0.0"))', 3, 3, 3),
    ('semver("1.0.0").compareTo(semver("1.2.3"))', 3, 3, 3),
    ("{'a': 1, 'b': 2}.all(k, v, v > 0)", 37, 41, 41),
    ("{'a': 1, 'b': 2}.exists(k, v, v > 0)", 39, 43, 40),
    ("{'a': 1, 'b': 2}.existsOne(k, v, v > 0)", 38, 40, 40),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v + 1)", 71, 71, 71),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v < 5, v + 1)", 67, 75, 75),
    ("{'a': 1, 'b': 2}.transformMapEntry(k, v, {k: v + 1})", 131, 131, 131),
    ("{'a': 1, 'b': 2}.transformMapEntry(k, v, v < 5, {k: v + 1})", 67, 135, 135),
    ("[1, 2].all(i, v, v > 0)", 17, 21, 21),
    ("[1, 2].exists(i, v, v > 0)", 19, 23, 20),
    ("[1, 2].existsOne(i, v, v > 0)", 18, 20, 20),
    ("[1, 2].transformList(i, v, v + 1)", 49, 49, 49),
    ("[1, 2].transformList(i, v, v < 5, v + 1)", 27, 53, 53),
]


def _test_sizes(node: AstNode) -> Estimate | None:
    """The size estimator of upstream's library cost tests: strings and bytes hold at most 12."""
    return Estimate(0, 12) if node.type in (STRING, BYTES_T) else None


ENV = Environment(
    [standard(), strings(2), kubernetes(), sets(), optionals(), two_var_comprehensions()],
    size_estimator=_test_sizes,
    call_estimator=estimate_call_cost,
    runtime_cost_rule=runtime_cost_rule,
    presence_test_cost=0,
)


@pytest.mark.parametrize(("expression", "est_min", "est_max", "actual"), CASES, ids=[c[0][:80] for c in CASES])
def test_library_cost(expression: str, est_min: int, est_max: int, actual: int) -> None:
    program = ENV.compile(expression)
    assert program.estimated_cost() == Estimate(est_min, est_max)
    _, cost = program.evaluate_with_cost({})
    assert cost == actual
