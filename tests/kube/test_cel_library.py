"""The Kubernetes CEL libraries as upstream's library tests state them: results, runtime error
messages (regular expressions, as upstream matches them) and compile errors."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kube.cel import CELCompileError, CELRuntimeError, kubernetes_environment
from kube.cel.kubernetes import CIDR, IP, Semver
from tests.kube.bounded import run_bounded

ENV = kubernetes_environment()
OK = object()

# (expression, expected value | OK, runtime error pattern, compile error pattern)
CASES: list[tuple[str, Any, str, str]] = [
    # quantity
    ('quantity("12Mi") == quantity("12582912")', True, "", ""),
    ('quantity("10Mo")', None, "quantities must match the regular expression.*", ""),
    ('quantity("10Mm")', None, "unable to parse quantity's suffix", ""),
    ('isQuantity("20")', True, "", ""),
    ('isQuantity("20M")', True, "", ""),
    ('isQuantity("20Mi")', True, "", ""),
    ('isQuantity("20Mo")', False, "", ""),
    ('isQuantity("10Mm")', False, "", ""),
    ("isQuantity([1, 2, 3])", None, "", "found no matching overload for 'isQuantity' applied to.*"),
    ('quantity("200M") == quantity("200M")', True, "", ""),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True, "", ""),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")',
        True,
        "",
        "",
    ),
    ('quantity("200M") == quantity("0.3G")', False, "", ""),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True, "", ""),
    ('quantity("50M").isLessThan(quantity("100M"))', True, "", ""),
    ('quantity("100M").isLessThan(quantity("50M"))', False, "", ""),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True, "", ""),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True, "", ""),
    ('quantity("50M").isGreaterThan(quantity("100M"))', False, "", ""),
    ('quantity("200M").compareTo(quantity("0.2G"))', 0, "", ""),
    ('quantity("50M").compareTo(quantity("50Mi"))', -1, "", ""),
    ('quantity("50Mi").compareTo(quantity("50M"))', 1, "", ""),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True, "", ""),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False, "", ""),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True, "", ""),
    ('quantity("50k").sub(20) == quantity("49980")', True, "", ""),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980, "", ""),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20, "", ""),
    ('quantity("50k").asInteger()', 50000, "", ""),
    ('quantity("9999999999999999999999999999999999999G").asInteger()', None, "cannot convert value to integer", ""),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False, "", ""),
    ('quantity("50").isInteger()', True, "", ""),
    ('quantity("50.703k").asApproximateFloat()', 50703.0, "", ""),
    ('quantity("-5").sign()', -1, "", ""),
    # semver
    ('semver("1.2.3") == semver("1.2.3")', True, "", ""),
    ('semver("v1.0")', None, "No Major.Minor.Patch elements found", ""),
    ('isSemver("1.2.3-beta.1+build.1")', True, "", ""),
    ('isSemver("")', False, "", ""),
    ('isSemver("v1.0.0")', False, "", ""),
    ('isSemver(" 1.0.0")', False, "", ""),
    ('isSemver("1. 0.0")', False, "", ""),
    ('isSemver("1.0.0 ")', False, "", ""),
    ('isSemver("01.01.01")', False, "", ""),
    ('isSemver("1")', False, "", ""),
    ('isSemver("1.1")', False, "", ""),
    ('isSemver("", true)', False, "", ""),
    ('isSemver(" 1.0.0", true)', False, "", ""),
    ('isSemver("1. 0.0", true)', False, "", ""),
    ('isSemver("1.0.0 ", true)', False, "", ""),
    ('isSemver("v1.0.0", true)', True, "", ""),
    ('isSemver("01.01.01", true)', True, "", ""),
    ('isSemver("1", true)', True, "", ""),
    ('isSemver("1.1", true)', True, "", ""),
    ("isSemver([1, 2, 3])", None, "", "found no matching overload for 'isSemver' applied to.*"),
    ('semver("v01.01", true) == semver("1.1.0")', True, "", ""),
    ('semver("1.2.3") == semver("1.0.0")', False, "", ""),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', True, "", ""),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', False, "", ""),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True, "", ""),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False, "", ""),
    ('semver("1.2.3").compareTo(semver("1.2.3"))', 0, "", ""),
    ('semver("1.0.0").compareTo(semver("1.2.3"))', -1, "", ""),
    ('semver("1.2.3").compareTo(semver("1.0.0"))', 1, "", ""),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1")) && semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True, "", ""),
    ('semver("1.2.3").major()', 1, "", ""),
    ('semver("1.2.3").minor()', 2, "", ""),
    ('semver("1.2.3").patch()', 3, "", ""),
    # IP
    ('ip("192.168.0.1")', IP, "", ""),
    (
        'ip("192.168.0.1.0")',
        None,
        re.escape(
            'IP Address "192.168.0.1.0" parse error during conversion from string: ParseAddr("192.168.0.1.0"): IPv4 address too long'
        ),
        "",
    ),
    ('isIP("192.168.0.1")', True, "", ""),
    ('isIP("192.168.0.1.0")', False, "", ""),
    ('ip.isCanonical("127.0.0.1")', True, "", ""),
    ('ip("192.168.0.1").family()', 4, "", ""),
    ('ip("0.0.0.0").isUnspecified()', True, "", ""),
    ('ip("127.0.0.1").isUnspecified()', False, "", ""),
    ('ip("127.0.0.1").isLoopback()', True, "", ""),
    ('ip("1.2.3.4").isLoopback()', False, "", ""),
    ('ip("224.0.0.1").isLinkLocalMulticast()', True, "", ""),
    ('ip("224.0.1.1").isLinkLocalMulticast()', False, "", ""),
    ('ip("169.254.169.254").isLinkLocalUnicast()', True, "", ""),
    ('ip("192.168.0.1").isLinkLocalUnicast()', False, "", ""),
    ('ip("192.168.0.1").isGlobalUnicast()', True, "", ""),
    ('ip("255.255.255.255").isGlobalUnicast()', False, "", ""),
    (
        'ip("2001:db8:::68")',
        None,
        re.escape(
            'IP Address "2001:db8:::68" parse error during conversion from string: ParseAddr("2001:db8:::68"): '
            'each colon-separated field must have at least one digit (at ":68")'
        ),
        "",
    ),
    ('isIP("2001:db8::68")', True, "", ""),
    ('isIP("2001:db8:::68")', False, "", ""),
    ('ip.isCanonical("2001:db8::68")', True, "", ""),
    ('ip.isCanonical("2001:DB8::68")', False, "", ""),
    ('ip("2001:db8::68").family()', 6, "", ""),
    ('ip("::").isUnspecified()', True, "", ""),
    ('ip("::1").isUnspecified()', False, "", ""),
    ('ip("::1").isLoopback()', True, "", ""),
    ('ip("2001:db8::abcd").isLoopback()', False, "", ""),
    ('ip("ff02::1").isLinkLocalMulticast()', True, "", ""),
    ('ip("fd00::1").isLinkLocalMulticast()', False, "", ""),
    ('ip("fe80::1").isLinkLocalUnicast()', True, "", ""),
    ('ip("fd80::1").isLinkLocalUnicast()', False, "", ""),
    ('ip("2001:db8::abcd").isGlobalUnicast()', True, "", ""),
    ('ip("ff00::1").isGlobalUnicast()', False, "", ""),
    ('isIP(cidr("192.168.0.0/24"))', None, "", re.escape("found no matching overload for 'isIP' applied to '(net.CIDR)'")),
    ('string(ip("192.168.0.1"))', "192.168.0.1", "", ""),
    ('type(ip("192.168.0.1")) == net.IP', True, "", ""),
    ('ip("::ffff:192.168.0.1")', None, re.escape('IPv4-mapped IPv6 address "::ffff:192.168.0.1" is not allowed'), ""),
    ('ip("fe80::1%eth0")', None, re.escape('IP address "fe80::1%eth0" with zone value is not allowed'), ""),
    # CIDR
    ("cidr(192168)", None, "", re.escape("found no matching overload for 'cidr' applied to '(int)'")),
    ('cidr(dyn("192.168.0.0/24"))', CIDR, "", ""),
    (
        'cidr("192.168.0.0/")',
        None,
        re.escape(
            "network address parse error during conversion from string: network address parse error during conversion from string: "
            'netip.ParsePrefix("192.168.0.0/"): bad bits after slash: ""'
        ),
        "",
    ),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))', True, "", ""),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))', False, "", ""),
    ('cidr("192.168.0.0/24").containsIP("192.168.0.1")', True, "", ""),
    ('cidr("192.168.0.0/24").containsIP("192.168.1.1")', False, "", ""),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))', True, "", ""),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))', False, "", ""),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")', True, "", ""),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', False, "", ""),
    ('cidr("192.168.0.0/24").ip() == ip("192.168.0.0")', True, "", ""),
    ('cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")', True, "", ""),
    ('cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")', True, "", ""),
    ('cidr("192.168.0.1/24") == cidr("192.168.0.1/24").masked()', False, "", ""),
    ('cidr("192.168.0.0/24").prefixLength()', 24, "", ""),
    ('cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))', True, "", ""),
    ('cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))', False, "", ""),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))', True, "", ""),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))', False, "", ""),
    ('cidr("2001:db8::/32").containsCIDR("2001:db8::/31")', False, "", ""),
    ('cidr("2001:db8::/32").ip() == ip("2001:db8::")', True, "", ""),
    ('cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")', True, "", ""),
    ('cidr("2001:db8::/32").prefixLength()', 32, "", ""),
    ('string(cidr("192.168.0.0/24"))', "192.168.0.0/24", "", ""),
    ('type(cidr("192.168.0.0/24")) == net.CIDR', True, "", ""),
    # lists
    ("[1, 2, 3].indexOf(2)", 1, "", ""),
    ("[1, 2, 2, 3].lastIndexOf(2)", 2, "", ""),
    ("[1, 2, 3].indexOf(4)", -1, "", ""),
    ("[1, 2, 3].sum()", 6, "", ""),
    ("[1.5, 2.5].sum()", 4.0, "", ""),
    ("[1, 2, 3].min() == 1 && [1, 2, 3].max() == 3", True, "", ""),
    ("['b', 'a'].min()", "a", "", ""),
    ("[1, 2, 3].isSorted() && !['b', 'a'].isSorted()", True, "", ""),
    ("[0][1:]", None, "", "Syntax error.*"),
    ("dyn([]).min()", None, "min called on empty list", ""),
    ("[1, 2].sum() == 3u", None, "", "found no matching overload for '_==_' applied to '\\(int, uint\\)'"),
    # regex
    ("'abc 123 def 456'.find('[0-9]+')", "123", "", ""),
    ("'abc'.find('[0-9]+')", "", "", ""),
    ("'abc 123 def 456'.findAll('[0-9]+')", ["123", "456"], "", ""),
    ("'abc 123 def 456'.findAll('[0-9]+', 1)", ["123"], "", ""),
    ("'baaa'.findAll('a*')", ["", "aaa"], "", ""),
    ("'abc'.find(dyn('['))", None, "", re.escape("program instantiation failed: error parsing regexp: missing closing ]: `[`")),
    ("'abc'.find(['['][0])", None, re.escape("error parsing regexp: missing closing ]: `[`"), ""),
    ("'abc\\n'.matches('abc$')", False, "", ""),
    ("'\u0663'.matches('^\\\\d$')", False, "", ""),
    ("'x'.matches('[[:alpha:]]')", True, "", ""),
    ("'a'.matches(['(a)\\\\1'][0])", None, "error parsing regexp: invalid escape sequence", ""),
    ("'a'.matches('(a)\\\\1')", None, "", "invalid matches argument"),
    # urls
    ("url('https://example.com:80/path?query=val#fragment').getScheme()", "https", "", ""),
    ("url('https://example.com:80/path?query=val#fragment').getHost()", "example.com:80", "", ""),
    ("url('https://example.com:80/path?query=val#fragment').getHostname()", "example.com", "", ""),
    ("url('https://example.com:80/path?query=val#fragment').getPort()", "80", "", ""),
    ("url('https://example.com:80/path?query=val#fragment').getEscapedPath()", "/path", "", ""),
    ("url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()", {"k1": ["a"], "k2": ["b", "c"]}, "", ""),
    ("url('https://[::1]:80/path').getHostname()", "::1", "", ""),
    ("url('https://[::1]:80/path').getPort()", "80", "", ""),
    ("isURL('https://example.com/')", True, "", ""),
    ("isURL('example.com')", False, "", ""),
    (
        "url('../relative')",
        None,
        re.escape('URL parse error during conversion from string: parse "../relative": invalid URI for request'),
        "",
    ),
    ("url('https://example.com:a/')", None, "invalid port", ""),
    # format
    ("format.dns1123Label().validate('my-label-name').hasValue()", False, "", ""),
    ("format.dns1123Label().validate('My-Label').hasValue()", True, "", ""),
    ("format.named('dns1123Subdomain').value().validate('apiextensions.k8s.io').hasValue()", False, "", ""),
    ("format.named('notAFormat').hasValue()", False, "", ""),
    ("format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').hasValue()", False, "", ""),
    ("format.labelValue().validate('a b').hasValue()", True, "", ""),
    ("format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()", False, "", ""),
    ("format.byte().validate('aGVsbG8=').hasValue()", False, "", ""),
    ("format.date().validate('2021-01-01').hasValue()", False, "", ""),
    ("format.datetime().validate('2021-01-01T00:00:00Z').hasValue()", False, "", ""),
    ("format.uri().validate('http://example.com').hasValue()", False, "", ""),
]


@pytest.mark.parametrize(("expression", "want", "runtime_error", "compile_error"), CASES, ids=[c[0][:90] for c in CASES])
def test_kubernetes_library(expression: str, want: Any, runtime_error: str, compile_error: str) -> None:
    try:
        program = ENV.compile(expression)
    except CELCompileError as exc:
        assert compile_error, f"unexpected compile error: {exc}"
        assert re.search(compile_error, str(exc)), str(exc)
        return
    assert not compile_error, "expected a compile error"
    try:
        got = program.evaluate({})
    except CELRuntimeError as exc:
        assert runtime_error, f"unexpected runtime error: {exc}"
        assert re.search(runtime_error, exc.detail), exc.detail
        return
    assert not runtime_error, f"expected an error, got {got!r}"
    if isinstance(want, type):
        assert isinstance(got, want)
    elif isinstance(want, dict):
        assert got == want
    else:
        assert type(got) is type(want) and got == want


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # In a subprocess killed after a while: with a backtracking engine this match would take hours.
    expression = "'" + "a" * 44 + "b'.matches('^(a+)+$')"
    assert run_bounded(f"from kube.cel import kubernetes_environment\nresult = kubernetes_environment().compile({expression!r}).evaluate({{}})") is False


def test_semver_parse_errors_are_blang_semver_messages() -> None:
    for text, message in [
        ("", "Version string empty"),
        ("1.2", "No Major.Minor.Patch elements found"),
        ("a.2.3", 'Invalid character(s) found in major number "a"'),
        ("01.2.3", 'Major number must not contain leading zeroes "01"'),
        ("1.2.3-01", 'Leading zeroes are not allowed "01"'),
        ("1.2.3-", "Prerelease is empty"),
        ("1.2.3+", "Buildversion is empty"),
    ]:
        with pytest.raises(CELRuntimeError) as info:
            ENV.compile(f'semver("{text}")').evaluate({})
        assert info.value.detail == message
    assert Semver("1.0.0+build") == Semver("1.0.0")


# string.format() of the strings extension before version 4 (what Kubernetes enables), en_US:
# (format string, argument list, expected output or error, error only at runtime)
FORMAT_CASES: list[tuple[str, str, str, bool]] = [
    ("no substitution", "", "no substitution", False),
    ("str is %s and some more", '"filler"', "str is filler and some more", False),
    ("%% and also %%", "", "% and also %", False),
    ("%%%s%%", '"text"', "%text%", False),
    ("%d %d %d, %s %s %s, %d %d %d, %s %s %s", '1, 2, 3, "A", "B", "C", 4, 5, 6, "D", "E", "F"', "1 2 3, A B C, 4 5 6, D E F", False),
    ("%.3f", "1.2345", "1.234", False),
    ("this is -5 in binary: %b", "-5", "this is -5 in binary: -101", False),
    ("unsigned 64 in binary: %b", "uint(64)", "unsigned 64 in binary: 1000000", False),
    ("bit set from bool: %b", "true", "bit set from bool: 1", False),
    ("%o", "-11", "-13", False),
    ("this is an unsigned octal: %o", "uint(65535)", "this is an unsigned octal: 177777", False),
    ("%x is 30 in hexadecimal", "30", "1e is 30 in hexadecimal", False),
    ("%X is 20 in hexadecimal", "30", "1E is 20 in hexadecimal", False),
    ("%x is -30 in hexadecimal", "-30", "-1e is -30 in hexadecimal", False),
    ("%x", '"Hello world!"', "48656c6c6f20776f726c6421", False),
    ("%X", 'b"byte string"', "6279746520737472696E67", False),
    ("%x", 'b"\\x00\\x00byte string\\x00"', "00006279746520737472696e6700", False),
    ("%.6e", "1052.032911275", "1.052033\u202f\u00d7\u202f10\u2070\u00b3", False),
    ("%f", "2.71828", "2.718280", False),
    ("%e", "2.71828", "2.718280\u202f\u00d7\u202f10\u2070\u2070", False),
    ("%.3f", "1234.5", "1,234.500", False),
    ("%s", "2.71", "2.71", False),
    ("%s", "[2.71]", "[2.710000]", False),
    ("%s", "0.000000002", "2e-09", False),
    ("%s", "[0.000000002]", "[0.000000]", False),
    ("%f", '"NaN"', "NaN", False),
    ("%f", '"Infinity"', "∞", False),
    ("%f", '"-Infinity"', "-∞", False),
    ("%s", 'double("NaN")', "NaN", False),
    ("%s", 'double("Inf")', "+Inf", False),
    ("%s", '[double("NaN"), double("+Inf"), double("-Inf")]', '["NaN", "+Inf", "-Inf"]', False),
    ("null: %s", "null", "null: null", False),
    ("%s", "999999999999", "999999999999", False),
    ("some bytes: %s", 'b"xyz"', "some bytes: xyz", False),
    ("type is %s", 'type("test string")', "type is string", False),
    ("%s", 'timestamp("2023-02-03T23:31:20+00:00")', "2023-02-03T23:31:20Z", False),
    ("%s", 'duration("1h45m47s")', "6347s", False),
    ("%s", 'duration("2ns")', "0.000000002s", False),
    (
        "%s",
        '["abc", 3.14, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")]',
        '["abc", 3.140000, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")]',
        False,
    ),
    ("%s", '{1: "value1", uint(2): "value2", true: double("NaN")}', '{1:"value1", 2:"value2", true:"NaN"}', False),
    ("true bool: %s, false bool: %s", "true, false", "true bool: true, false bool: false", False),
    ("%a", "1", 'could not parse formatting clause: unrecognized formatting clause "a"', True),
    ("%d %d %d", "0, 1", "index 2 out of range", True),
    ("string is %b", '"abc"', "error during formatting: only integers and bools can be formatted as binary, was given string", True),
    (
        "%d",
        'duration("30m2s")',
        "error during formatting: decimal clause can only be used on integers, was given google.protobuf.Duration",
        True,
    ),
    (
        "double is %x",
        "0.5",
        "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double",
        True,
    ),
    ("null: %f", "null", "error during formatting: fixed-point clause can only be used on doubles, was given null_type", True),
    ("%s %s", '"abc"', "index 1 out of range", False),
    ("%s %s", '"abc", "def", "ghi"', "too many arguments supplied to string.format (expected 2, got 3)", False),
    ("filler %", "", "unexpected end of string", False),
    ("%j", "123", 'could not parse formatting clause: unrecognized formatting clause "j"', False),
    ("int is %d", "5.2", "error during formatting: decimal clause can only be used on integers, was given double", False),
    ("double is %f", "true", "error during formatting: fixed-point clause can only be used on doubles, was given bool", False),
    (
        "double is %.34",
        "5.0",
        "could not parse formatting clause: error while parsing precision: could not find end of precision specifier",
        False,
    ),
    ("an octal: %o", "3.14", "error during formatting: octal clause can only be used on integers, was given double", False),
]


@pytest.mark.parametrize(("fmt", "args", "want", "runtime_only"), FORMAT_CASES, ids=[f"{c[0]}|{c[1]}"[:80] for c in FORMAT_CASES])
def test_string_format(fmt: str, args: str, want: str, runtime_only: bool) -> None:
    expression = f'"{fmt}".format([{args}])'
    is_error = want.startswith(("could not", "index ", "error during", "too many", "unexpected end"))
    if is_error and not runtime_only:
        with pytest.raises(CELCompileError) as compile_info:
            ENV.compile(expression)
        assert want in str(compile_info.value)
        return
    program = ENV.compile(expression, check_types=not runtime_only)
    if is_error:
        with pytest.raises(CELRuntimeError) as info:
            program.evaluate({})
        assert info.value.detail == want
        return
    assert program.evaluate({}) == want
