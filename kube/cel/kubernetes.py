"""The Kubernetes CEL libraries (k8s.io/apiserver/pkg/cel/library): quantity, semver, lists,
regex, URLs, IP addresses and CIDRs, named formats; with Kubernetes' cost rules."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from kube.cel.checker import Function
from kube.cel.cost import ONE, AstNode, CallEstimate, Estimate, fixed
from kube.cel.library import COMPARABLE_TYPES, A, fn, ov
from kube.cel.regex import find, find_all
from kube.cel.types import (
    BOOL,
    BYTES_K,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    INT64_MAX,
    INT64_MIN,
    LIBRARY_TYPES,
    OPAQUE_K,
    OPTIONAL_NONE,
    STRING,
    STRING_K,
    STRUCT_K,
    UINT,
    EvalError,
    Optional,
    Type,
    UInt,
    compare,
    equals,
    list_of,
    map_of,
    opaque,
    optional_of,
    size_of,
    struct,
    type_of,
)
from kube.quantity import DECIMAL_EXPONENT, Quantity, QuantityError

QUANTITY = struct("kubernetes.Quantity")
SEMVER = struct("kubernetes.Semver")
URL_T = struct("kubernetes.URL")
FORMAT_T = struct("kubernetes.NamedFormat")
IP_T = opaque("net.IP")
CIDR_T = opaque("net.CIDR")

STRING_FACTOR = 0.1
REGEX_FACTOR = 0.25

LIBRARY_TYPES[Quantity] = QUANTITY

# --- semver (blang/semver parsing and ordering) -------------------------------------------------

_DIGITS = set("0123456789")
_ALNUM = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")


class Semver:
    __slots__ = ("build", "major", "minor", "patch", "pre", "text")
    go_type_name = "cel.Semver"

    def __init__(self, text: str) -> None:
        self.text = text
        self.major, self.minor, self.patch, self.pre, self.build = _parse_semver(text)

    def cel_compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return -1 if a < b else 1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return -1 if x < y else 1
            if isinstance(x, int):
                return -1
            if isinstance(y, int):
                return 1
            return -1 if x < y else 1
        if len(self.pre) == len(other.pre):
            return 0
        return -1 if len(self.pre) < len(other.pre) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.cel_compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        return f"Semver({self.text!r})"


LIBRARY_TYPES[Semver] = SEMVER


def _semver_number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise EvalError(f"Invalid character(s) found in {what} number {go_q(text)}")
    if len(text) > 1 and text[0] == "0":
        raise EvalError(f"{what.capitalize()} number must not contain leading zeroes {go_q(text)}")
    value = int(text)
    if value > 2**64 - 1:
        raise EvalError(f"strconv.ParseUint: parsing {go_q(text)}: value out of range")
    return value


def _parse_semver(s: str) -> tuple[int, int, int, tuple[Any, ...], tuple[str, ...]]:
    if not s:
        raise EvalError("Version string empty")
    parts = s.split(".", 2)
    if len(parts) != 3:
        raise EvalError("No Major.Minor.Patch elements found")
    major = _semver_number(parts[0], "major")
    minor = _semver_number(parts[1], "minor")
    rest = parts[2]
    pre_i, build_i = rest.find("-"), rest.find("+")
    cut = len(rest)
    for i in (pre_i, build_i):
        if i != -1:
            cut = min(cut, i)
    patch = _semver_number(rest[:cut], "patch")
    pre: list[Any] = []
    build: list[str] = []
    if build_i != -1:
        for b in rest[build_i + 1 :].split("."):
            if not b:
                raise EvalError("Buildversion is empty")
            if not set(b) <= _ALNUM:
                raise EvalError(f"Invalid character(s) found in build meta data {go_q(b)}")
            build.append(b)
    if pre_i != -1 and (build_i == -1 or pre_i < build_i):
        end = build_i if build_i != -1 else len(rest)
        for p in rest[pre_i + 1 : end].split("."):
            if not p:
                raise EvalError("Prerelease is empty")
            if set(p) <= _DIGITS:
                if len(p) > 1 and p[0] == "0":
                    raise EvalError(f"Leading zeroes are not allowed {go_q(p)}")
                pre.append(int(p))
            elif set(p) <= _ALNUM:
                pre.append(p)
            else:
                raise EvalError(f"Invalid character(s) found in prerelease {go_q(p)}")
    return major, minor, patch, tuple(pre), tuple(build)


def _normalize_semver(s: str) -> str:
    s = s[1:] if s.startswith("v") else s
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _DIGITS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise EvalError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def semver(s: str, normalize: bool = False) -> Semver:
    return Semver(_normalize_semver(s) if normalize else s)


def is_semver(s: str, normalize: bool = False) -> bool:
    try:
        semver(s, normalize)
    except EvalError:
        return False
    return True


def go_q(s: str) -> str:
    from kube.labels import go_quote

    return go_quote(s)


# --- quantity -----------------------------------------------------------------------------------


def quantity(s: str) -> Quantity:
    try:
        return Quantity.parse_strict(s) if hasattr(Quantity, "parse_strict") else _parse_quantity(s)
    except QuantityError as exc:
        raise EvalError(str(exc)) from None


def _parse_quantity(s: str) -> Quantity:
    # resource.ParseQuantity does not trim spaces (JSON decoding does).
    if s != s.strip() or not s:
        raise QuantityError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return Quantity.parse(s)


def is_quantity(s: str) -> bool:
    try:
        quantity(s)
    except EvalError:
        return False
    return True


def _q_int(q: Quantity) -> int | None:
    frac = q.as_fraction()
    if frac.denominator != 1 or not INT64_MIN <= frac.numerator <= INT64_MAX:
        return None
    return int(frac.numerator)


def _q_as_integer(q: Quantity) -> int:
    v = _q_int(q)
    if v is None:
        raise EvalError("cannot convert value to integer")
    return v


def _q_add(q: Quantity, other: Any, sign: int) -> Quantity:
    o = other if isinstance(other, Quantity) else Quantity(int(other), DECIMAL_EXPONENT)
    try:
        return q + o if sign > 0 else q - o
    except OverflowError as exc:
        raise EvalError(str(exc)) from None


def _q_float(q: Quantity) -> float:
    try:
        return float(q.as_fraction())
    except OverflowError:
        return math.inf if q.sign > 0 else -math.inf


# --- lists --------------------------------------------------------------------------------------


def _is_sorted(lst: list[Any]) -> bool:
    return all(compare(lst[i], lst[i + 1], "isSorted") <= 0 for i in range(len(lst) - 1))


def _sum(zero: Any) -> Callable[[list[Any]], Any]:
    def total(lst: list[Any]) -> Any:
        from kube.cel.library import standard_library  # noqa: F401  (keeps import graph acyclic)

        acc = zero
        for x in lst:
            acc = _add(acc, x)
        return acc

    return total


def _add(a: Any, b: Any) -> Any:
    from kube.cel.types import check_int, check_uint

    if type(a) is UInt:
        return check_uint(a + b)
    if type(a) is int:
        return check_int(a + b)
    return a + b


def _extreme(name: str, prefer: int) -> Callable[[list[Any]], Any]:
    def pick(lst: list[Any]) -> Any:
        if not lst:
            raise EvalError(f"{name} called on empty list")
        best = lst[0]
        for x in lst[1:]:
            if compare(best, x, name) == prefer:
                best = x
        return best

    return pick


def _index_of(lst: list[Any], item: Any) -> int:
    for i, x in enumerate(lst):
        if equals(x, item):
            return i
    return -1


def _last_index_of(lst: list[Any], item: Any) -> int:
    for i in range(len(lst) - 1, -1, -1):
        if equals(lst[i], item):
            return i
    return -1


def includes(target: Any, arg: Any) -> bool:
    """DRA's ``includes``: membership in a list attribute, or equality with a scalar one."""
    if isinstance(target, list | tuple):
        for i, x in enumerate(target):
            if i >= MAX_ATTRIBUTE_VALUES:
                raise EvalError(f"'includes' function cannot be applied to lists longer than {MAX_ATTRIBUTE_VALUES} values")
            if equals(x, arg):
                return True
        return False
    return equals(target, arg)


MAX_ATTRIBUTE_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice

# --- IP and CIDR --------------------------------------------------------------------------------


class IP:
    __slots__ = ("addr",)
    go_type_name = "cel.IP"

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self.addr == other.addr

    def __hash__(self) -> int:
        return hash(self.addr)

    def cel_size(self) -> int:
        return 4 if self.addr.version == 4 else 16

    def __str__(self) -> str:
        return str(self.addr)


class CIDR:
    __slots__ = ("addr", "bits")
    go_type_name = "cel.CIDR"

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address, bits: int) -> None:
        self.addr = addr
        self.bits = bits

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and self.addr == other.addr and self.bits == other.bits

    def __hash__(self) -> int:
        return hash((self.addr, self.bits))

    def cel_size(self) -> int:
        return -(-self.bits // 8)  # the prefix's bytes, as upstream sizes a CIDR

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(f"{self.addr}/{self.bits}", strict=False)

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"


LIBRARY_TYPES[IP] = IP_T
LIBRARY_TYPES[CIDR] = CIDR_T


class _AddrError(Exception):
    def __init__(self, raw: str, message: str, at: str | None = None) -> None:
        text = f"ParseAddr({go_q(raw)}): {message}"
        super().__init__(text + (f" (at {go_q(at)})" if at is not None else ""))


def _ipv4_fields(raw: str, s: str) -> list[int]:
    fields: list[int] = []
    val = digits = 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                raise _AddrError(raw, "IPv4 field has octet with leading zero")
            val = val * 10 + ord(c) - 48
            digits += 1
            if val > 255:
                raise _AddrError(raw, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _AddrError(raw, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _AddrError(raw, "IPv4 address too long")
            fields.append(val)
            val = digits = 0
        else:
            raise _AddrError(raw, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _AddrError(raw, "IPv4 address too short")
    return [*fields, val]


def _ipv6(raw: str) -> tuple[bytes, str]:
    s, zone = raw, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _AddrError(raw, "zone must be a non-empty string")
    out = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis = 0
        s = s[2:]
        if not s:
            return bytes(out), zone
    i = 0
    while i < 16:
        off = acc = 0
        while off < len(s):
            c = s[off]
            if c in "0123456789abcdefABCDEF":
                acc = (acc << 4) + int(c, 16)
            else:
                break
            if off > 3:
                raise _AddrError(raw, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _AddrError(raw, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _AddrError(raw, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _AddrError(raw, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise _AddrError(raw, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            out[i : i + 4] = bytes(_ipv4_fields(raw, s))
            s = ""
            i += 4
            break
        out[i], out[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _AddrError(raw, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _AddrError(raw, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _AddrError(raw, "multiple :: in address", s)
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        raise _AddrError(raw, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _AddrError(raw, "address string too short")
        n = 16 - i
        out[ellipsis + n : 16] = out[ellipsis:i]
        out[ellipsis : ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _AddrError(raw, "the :: must expand to at least one field of zeros", s)
    return bytes(out), zone


def go_parse_addr(raw: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, str]:
    """Go's netip.ParseAddr: the address and its zone; errors carry Go's messages."""
    for c in raw:
        if c == ".":
            return ipaddress.IPv4Address(bytes(_ipv4_fields(raw, raw))), ""
        if c == ":":
            packed, zone = _ipv6(raw)
            return ipaddress.IPv6Address(packed), zone
        if c == "%":
            raise _AddrError(raw, "missing IPv6 address")
    raise _AddrError(raw, "unable to parse IP")


def _parse_addr(raw: str, context: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """netip.ParseAddr with Kubernetes' refusals (zones, IPv4-mapped IPv6)."""
    try:
        addr, zone = go_parse_addr(raw)
    except _AddrError as exc:
        raise EvalError(f"{context}: {exc}") from None
    if zone:
        raise EvalError(f"IP address {go_q(raw)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise EvalError(f"IPv4-mapped IPv6 address {go_q(raw)} is not allowed")
    return addr


def ip(s: str) -> IP:
    return IP(_parse_addr(s, f"IP Address {go_q(s)} parse error during conversion from string"))


def is_ip(s: str) -> bool:
    try:
        ip(s)
    except EvalError:
        return False
    return True


def ip_is_canonical(s: str) -> bool:
    return str(ip(s).addr) == s


def _global_unicast(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


def _link_local_multicast(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if a.version == 4:
        return a in ipaddress.IPv4Network("224.0.0.0/24")
    return a in ipaddress.IPv6Network("ff02::/16")


def cidr(s: str) -> CIDR:
    context = "network address parse error during conversion from string"
    addr_text, sep, bits_text = s.rpartition("/")

    def fail(message: str) -> EvalError:
        return EvalError(f"{context}: {context}: netip.ParsePrefix({go_q(s)}): {message}")

    if not sep:
        raise fail("no '/'")
    try:
        addr, zone = go_parse_addr(addr_text)
    except _AddrError as exc:
        raise fail(str(exc)) from None
    if zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    if (len(bits_text) > 1 and not "1" <= bits_text[0] <= "9") or not re.fullmatch(r"[+-]?[0-9]+", bits_text):
        raise fail(f"bad bits after slash: {go_q(bits_text)}")
    bits = int(bits_text)
    if not 0 <= bits <= (32 if addr.version == 4 else 128):
        raise fail("prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise EvalError(f"{context}: IPv4-mapped IPv6 address {go_q(s)} is not allowed")
    return CIDR(addr, bits)


def is_cidr(s: str) -> bool:
    try:
        cidr(s)
    except EvalError:
        return False
    return True


def _cidr_contains_ip(c: CIDR, other: Any) -> bool:
    addr = (ip(other) if isinstance(other, str) else other).addr
    return addr.version == c.addr.version and addr in c.network()


def _cidr_contains_cidr(c: CIDR, other: Any) -> bool:
    o = cidr(other) if isinstance(other, str) else other
    if o.addr.version != c.addr.version:
        return False
    return c.bits <= o.bits and ipaddress.ip_network(f"{o.addr}/{c.bits}", strict=False) == c.network()


def _masked(c: CIDR) -> CIDR:
    return CIDR(c.network().network_address, c.bits)


# --- URLs (Go's net/url) ------------------------------------------------------------------------


class URL:
    __slots__ = ("fragment", "host", "opaque", "path", "raw", "raw_path", "raw_query", "scheme", "user")
    go_type_name = "cel.URL"

    def __init__(self) -> None:
        self.scheme = self.opaque = self.user = self.host = self.path = self.raw_path = self.raw_query = self.fragment = ""
        self.raw = ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and self.raw == other.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def cel_size(self) -> int:
        return len(self.raw)


LIBRARY_TYPES[URL] = URL_T


class _URLError(Exception):
    pass


_SCHEME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+\-.]*")


def _go_unescape(s: str, mode: str) -> str:
    i = 0
    while i < len(s):
        if s[i] == "%":
            if i + 2 >= len(s) + 0 and (i + 2 > len(s) - 1 and not (i + 2 < len(s) + 1 and len(s[i + 1 : i + 3]) == 2)):
                raise _URLError(f"invalid URL escape {go_q(s[i : i + 3])}")
            h = s[i + 1 : i + 3]
            if len(h) < 2 or not all(c in "0123456789abcdefABCDEF" for c in h):
                raise _URLError(f"invalid URL escape {go_q(s[i : i + 3])}")
            i += 3
            continue
        if mode == "host" and s[i] not in "!$&'()*+,;=:[]<>\"" and not s[i].isalnum() and s[i] not in "-._~" and ord(s[i]) < 0x80:
            raise _URLError(f"invalid character {go_q(s[i])} in host name")
        i += 1
    return unquote(s) if mode != "query" else unquote(s.replace("+", " "))


def _parse_url(raw: str, via_request: bool) -> URL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise _URLError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise _URLError("empty url")
    u = URL()
    u.raw = raw
    if raw == "*":
        u.path = "*"
        return u
    rest = raw
    m = _SCHEME_RE.match(raw)
    if m and m.end() < len(raw) and raw[m.end()] == ":":
        u.scheme = m.group().lower()
        rest = raw[m.end() + 1 :]
    elif raw.startswith(":"):
        raise _URLError("missing protocol scheme")
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    elif "?" in rest:
        rest, _, u.raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if u.scheme:
            u.opaque = rest
            return u
        if via_request:
            raise _URLError("invalid URI for request")
        colon, slash = rest.find(":"), rest.find("/")
        if colon != -1 and (slash == -1 or colon < slash):
            raise _URLError("first path segment in URL cannot contain colon")
    if (u.scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, sep, tail = rest[2:].partition("/")
        rest = sep + tail
        userinfo, at, host = authority.rpartition("@")
        if not at:
            host, userinfo = authority, ""
        u.user = userinfo
        u.host = _parse_host(host)
    u.path = _go_unescape(rest, "path")
    u.raw_path = rest
    return u


def _parse_host(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise _URLError("missing ']' in host")
        port = host[end + 1 :]
        if port and (port[0] != ":" or (not port[1:].isdigit() and port[1:] != "")):
            raise _URLError(f"invalid port {go_q(port)} after host")
        return host
    if ":" in host:
        _, _, port = host.rpartition(":")
        if port and not port.isdigit():
            raise _URLError(f"invalid port {go_q(':' + port)} after host")
    _go_unescape(host, "host")
    return host


def url(s: str) -> URL:
    try:
        _parse_url(s, True)
        text, _, fragment = s.partition("#")
        u = _parse_url(text, False)
        u.fragment = fragment
        u.raw = s
        return u
    except _URLError as exc:
        raise EvalError(f"URL parse error during conversion from string: parse {go_q(s)}: {exc}") from None


def is_url(s: str) -> bool:
    try:
        _parse_url(s, True)
    except _URLError:
        return False
    return True


def _hostname(u: URL) -> str:
    host = u.host
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(u: URL) -> str:
    host = u.host
    if host.startswith("["):
        rest = host[host.find("]") + 1 :]
        return rest[1:] if rest.startswith(":") else ""
    return host.rpartition(":")[2] if ":" in host else ""


def _query(u: URL) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in u.raw_query.split("&"):
        if not part or ";" in part:
            continue
        k, _, v = part.partition("=")
        try:
            key, value = _go_unescape(k, "query"), _go_unescape(v, "query")
        except _URLError:
            continue
        out.setdefault(key, []).append(value)
    return out


# --- named formats ------------------------------------------------------------------------------


class NamedFormat:
    __slots__ = ("max_regex_size", "name", "validate")
    go_type_name = "*cel.Format"

    def __init__(self, name: str, validate: Callable[[str], list[str]], max_regex_size: int) -> None:
        self.name = name
        self.validate = validate
        self.max_regex_size = max_regex_size


LIBRARY_TYPES[NamedFormat] = FORMAT_T

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_UUID = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def _dns_label(prefix: bool, rfc1035: bool) -> Callable[[str], list[str]]:
    def check(s: str) -> list[str]:
        if prefix:
            s = s[:-1] if s.endswith("-") else s
        errs = []
        if len(s) > 63:
            errs.append("must be no more than 63 characters")
        rx = _DNS1035_LABEL if rfc1035 else _DNS1123_LABEL
        if not rx.fullmatch(s):
            if rfc1035:
                errs.append(
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
                    "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                )
            else:
                errs.append(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
                    "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                )
        return errs

    return check


def _dns_subdomain(prefix: bool) -> Callable[[str], list[str]]:
    def check(s: str) -> list[str]:
        if prefix:
            s = s[:-1] if s.endswith("-") else s
        errs = []
        if len(s) > 253:
            errs.append("must be no more than 253 characters")
        if not _DNS1123_SUBDOMAIN.fullmatch(s):
            errs.append(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            )
        return errs

    return check


def _uri(s: str) -> list[str]:
    try:
        _parse_url(s, True)
    except _URLError as exc:
        return [f"parse {go_q(s)}: {exc}"]
    return []


def _simple(check: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda s: [] if check(s) else [message]


def _valid_date(s: str) -> bool:
    import datetime

    try:
        datetime.date.fromisoformat(s)
    except ValueError:
        return False
    return len(s) == 10


def _valid_datetime(s: str) -> bool:
    import datetime

    try:
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in s.upper() or " " in s


def _named_formats() -> dict[str, NamedFormat]:
    from kube.labels import label_key_errors, label_value_errors

    return {
        "dns1123Label": NamedFormat("DNS1123Label", _dns_label(False, False), 30),
        "dns1123Subdomain": NamedFormat("DNS1123Subdomain", _dns_subdomain(False), 60),
        "dns1035Label": NamedFormat("DNS1035Label", _dns_label(False, True), 30),
        "qualifiedName": NamedFormat("QualifiedName", label_key_errors, 60),
        "dns1123LabelPrefix": NamedFormat("DNS1123LabelPrefix", _dns_label(True, False), 30),
        "dns1123SubdomainPrefix": NamedFormat("DNS1123SubdomainPrefix", _dns_subdomain(True), 60),
        "dns1035LabelPrefix": NamedFormat("DNS1035LabelPrefix", _dns_label(True, True), 30),
        "labelValue": NamedFormat("LabelValue", label_value_errors, 40),
        "uri": NamedFormat("URI", _uri, 1065),
        "uuid": NamedFormat("uuid", _simple(lambda s: bool(_UUID.match(s)), "does not match the UUID format"), 88),
        "byte": NamedFormat("byte", _simple(lambda s: bool(_BASE64.match(s)), "invalid base64"), 85),
        "date": NamedFormat("date", _simple(_valid_date, "invalid date"), 136),
        "datetime": NamedFormat("datetime", _simple(_valid_datetime, "invalid datetime"), 136),
    }


NAMED_FORMATS = _named_formats()
MAX_NAME_FORMAT_REGEX_SIZE = 128
MAX_FORMAT_SIZE = 64


def _format_validate(f: NamedFormat, s: str) -> Optional:
    problems = f.validate(s)
    return Optional(True, list(problems)) if problems else OPTIONAL_NONE


# --- declarations -------------------------------------------------------------------------------


_SUMMABLE = [("int", INT, 0), ("uint", UINT, UInt(0)), ("double", DOUBLE, 0.0), ("duration", DURATION, None)]


def _duration_zero() -> Any:
    from kube.cel.time import Duration

    return Duration(0)


def kubernetes_libraries() -> list[Function]:
    """urls, regex, lists, quantity, IP, CIDR, format and semver (version 1)."""
    sums = []
    for name, t, zero in _SUMMABLE:
        sums.append(ov(f"list_{name}_sum_{name}", (list_of(t),), t, _sum(zero if zero is not None else _duration_zero()), member=True))
    return [
        # urls
        fn("url", ov("string_to_url", (STRING,), URL_T, url)),
        fn("getScheme", ov("url_get_scheme", (URL_T,), STRING, lambda u: u.scheme, member=True)),
        fn("getHost", ov("url_get_host", (URL_T,), STRING, lambda u: u.host, member=True)),
        fn("getHostname", ov("url_get_hostname", (URL_T,), STRING, _hostname, member=True)),
        fn("getPort", ov("url_get_port", (URL_T,), STRING, _port, member=True)),
        fn("getEscapedPath", ov("url_get_escaped_path", (URL_T,), STRING, lambda u: u.raw_path, member=True)),
        fn("getQuery", ov("url_get_query", (URL_T,), map_of(STRING, list_of(STRING)), _query, member=True)),
        fn("isURL", ov("is_url_string", (STRING,), BOOL, is_url)),
        # regex
        fn("find", ov("string_find_string", (STRING, STRING), STRING, find, member=True)),
        fn(
            "findAll",
            ov("string_find_all_string", (STRING, STRING), list_of(STRING), find_all, member=True),
            ov("string_find_all_string_int", (STRING, STRING, INT), list_of(STRING), find_all, member=True),
        ),
        # lists
        fn("isSorted", *[ov(f"list_{n}_is_sorted_bool", (list_of(t),), BOOL, _is_sorted, member=True) for n, t in COMPARABLE_TYPES]),
        fn("sum", *sums),
        fn("max", *[ov(f"list_{n}_max_{n}", (list_of(t),), t, _extreme("max", -1), member=True) for n, t in COMPARABLE_TYPES]),
        fn("min", *[ov(f"list_{n}_min_{n}", (list_of(t),), t, _extreme("min", 1), member=True) for n, t in COMPARABLE_TYPES]),
        fn("indexOf", ov("list_a_index_of_int", (list_of(A), A), INT, _index_of, member=True)),
        fn("lastIndexOf", ov("list_a_last_index_of_int", (list_of(A), A), INT, _last_index_of, member=True)),
        # quantity
        fn("quantity", ov("string_to_quantity", (STRING,), QUANTITY, quantity)),
        fn("isQuantity", ov("is_quantity_string", (STRING,), BOOL, is_quantity)),
        fn("sign", ov("quantity_sign", (QUANTITY,), INT, lambda q: q.sign, member=True)),
        fn("isGreaterThan", ov("quantity_is_greater_than", (QUANTITY, QUANTITY), BOOL, lambda a, b: a.compare(b) == 1, member=True)),
        fn("isLessThan", ov("quantity_is_less_than", (QUANTITY, QUANTITY), BOOL, lambda a, b: a.compare(b) == -1, member=True)),
        fn("compareTo", ov("quantity_compare_to", (QUANTITY, QUANTITY), INT, lambda a, b: a.compare(b), member=True)),
        fn("asApproximateFloat", ov("quantity_get_float", (QUANTITY,), DOUBLE, _q_float, member=True)),
        fn("asInteger", ov("quantity_get_int", (QUANTITY,), INT, _q_as_integer, member=True)),
        fn("isInteger", ov("quantity_is_integer", (QUANTITY,), BOOL, lambda q: _q_int(q) is not None, member=True)),
        fn(
            "add",
            ov("quantity_add", (QUANTITY, QUANTITY), QUANTITY, lambda a, b: _q_add(a, b, 1), member=True),
            ov("quantity_add_int", (QUANTITY, INT), QUANTITY, lambda a, b: _q_add(a, b, 1), member=True),
        ),
        fn(
            "sub",
            ov("quantity_sub", (QUANTITY, QUANTITY), QUANTITY, lambda a, b: _q_add(a, b, -1), member=True),
            ov("quantity_sub_int", (QUANTITY, INT), QUANTITY, lambda a, b: _q_add(a, b, -1), member=True),
        ),
        # IP
        fn("ip", ov("string_to_ip", (STRING,), IP_T, ip), ov("cidr_ip", (CIDR_T,), IP_T, lambda c: IP(c.addr), member=True)),
        fn("family", ov("ip_family", (IP_T,), INT, lambda a: a.addr.version, member=True)),
        fn("ip.isCanonical", ov("ip_is_canonical", (STRING,), BOOL, ip_is_canonical)),
        fn("isUnspecified", ov("ip_is_unspecified", (IP_T,), BOOL, lambda a: a.addr.is_unspecified, member=True)),
        fn("isLoopback", ov("ip_is_loopback", (IP_T,), BOOL, lambda a: a.addr.is_loopback, member=True)),
        fn("isLinkLocalMulticast", ov("ip_is_link_local_multicast", (IP_T,), BOOL, lambda a: _link_local_multicast(a.addr), member=True)),
        fn("isLinkLocalUnicast", ov("ip_is_link_local_unicast", (IP_T,), BOOL, lambda a: a.addr.is_link_local, member=True)),
        fn("isGlobalUnicast", ov("ip_is_global_unicast", (IP_T,), BOOL, lambda a: _global_unicast(a.addr), member=True)),
        fn("isIP", ov("is_ip", (STRING,), BOOL, is_ip)),
        fn("string", ov("ip_to_string", (IP_T,), STRING, str), ov("cidr_to_string", (CIDR_T,), STRING, str)),
        # CIDR
        fn("cidr", ov("string_to_cidr", (STRING,), CIDR_T, cidr)),
        fn(
            "containsIP",
            ov("cidr_contains_ip_string", (CIDR_T, STRING), BOOL, _cidr_contains_ip, member=True),
            ov("cidr_contains_ip_ip", (CIDR_T, IP_T), BOOL, _cidr_contains_ip, member=True),
        ),
        fn(
            "containsCIDR",
            ov("cidr_contains_cidr_string", (CIDR_T, STRING), BOOL, _cidr_contains_cidr, member=True),
            ov("cidr_contains_cidr", (CIDR_T, CIDR_T), BOOL, _cidr_contains_cidr, member=True),
        ),
        fn("prefixLength", ov("cidr_prefix_length", (CIDR_T,), INT, lambda c: c.bits, member=True)),
        fn("masked", ov("cidr_masked", (CIDR_T,), CIDR_T, _masked, member=True)),
        fn("isCIDR", ov("is_cidr", (STRING,), BOOL, is_cidr)),
        # format
        fn("validate", ov("format-validate", (FORMAT_T, STRING), optional_of(list_of(STRING)), _format_validate, member=True)),
        fn(
            "format.named",
            ov(
                "format-named",
                (STRING,),
                optional_of(FORMAT_T),
                lambda n: Optional(True, NAMED_FORMATS[n]) if n in NAMED_FORMATS else OPTIONAL_NONE,
            ),
        ),
        *[fn(f"format.{name}", ov(f"format.{name}", (), FORMAT_T, _constant(f))) for name, f in NAMED_FORMATS.items()],
        # semver
        fn("semver", ov("string_to_semver", (STRING,), SEMVER, semver), ov("string_bool_to_semver", (STRING, BOOL), SEMVER, semver)),
        fn("isSemver", ov("is_semver_string", (STRING,), BOOL, is_semver), ov("is_semver_string_bool", (STRING, BOOL), BOOL, is_semver)),
        fn("major", ov("semver_major", (SEMVER,), INT, lambda v: v.major, member=True)),
        fn("minor", ov("semver_minor", (SEMVER,), INT, lambda v: v.minor, member=True)),
        fn("patch", ov("semver_patch", (SEMVER,), INT, lambda v: v.patch, member=True)),
        fn("isGreaterThan", ov("semver_is_greater_than", (SEMVER, SEMVER), BOOL, lambda a, b: a.cel_compare(b) == 1, member=True)),
        fn("isLessThan", ov("semver_is_less_than", (SEMVER, SEMVER), BOOL, lambda a, b: a.cel_compare(b) == -1, member=True)),
        fn("compareTo", ov("semver_compare_to", (SEMVER, SEMVER), INT, lambda a, b: a.cel_compare(b), member=True)),
    ]


# Type names the IP and CIDR libraries declare (``type(ip("::1")) == net.IP``).
KUBERNETES_TYPE_VALUES: dict[str, Type] = {"net.IP": IP_T, "net.CIDR": CIDR_T}
KUBERNETES_TYPE_IDENTS: dict[str, Type] = {name: type_of(t) for name, t in KUBERNETES_TYPE_VALUES.items()}

# --- costs (library.CostEstimator) --------------------------------------------------------------


def _ceil(x: float) -> int:
    return math.ceil(x)


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _traversal_cost(v: Any) -> int:
    t = type(v)
    if t is str or t is bytes:
        return int(len(v.encode() if t is str else v) * STRING_FACTOR)
    if isinstance(v, list | tuple):
        return sum(_traversal_cost(x) for x in v)
    if isinstance(v, dict):
        return sum(_traversal_cost(k) + _traversal_cost(x) for k, x in v.items())
    return 1


_NOMINAL = frozenset({
    "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
    "isGlobalUnicast", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
    "compareTo", "add", "sub", "major", "minor", "patch", "getScheme", "getHostname", "getHost", "getPort",
    "getEscapedPath", "getQuery", "format.named",
})  # fmt: skip


RuntimeCost = Callable[[list[Any], Any], int]
_KUBERNETES_VALUES = (Quantity, IP, CIDR, NamedFormat, URL, Semver)


def _string_scan(factor: float, index: int = 0) -> RuntimeCost:
    return lambda args, result: _ceil(size_of(args[index]) * factor)


def runtime_cost_rule(function: str, overload: str) -> RuntimeCost | int | None:
    """Kubernetes' actual cost of a library call, chosen once per call site (None: cel-go's default)."""
    if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
        return lambda args, result: _traversal_cost(args[0]) if args else 0
    if function in (
        "url",
        "lowerAscii",
        "upperAscii",
        "substring",
        "trim",
        "cidr",
        "isIP",
        "isCIDR",
        "quantity",
        "isQuantity",
        "semver",
        "isSemver",
    ):
        return _string_scan(STRING_FACTOR)
    if function in ("replace", "split"):
        return _string_scan(2 * STRING_FACTOR)
    if function == "join":
        return lambda args, result: _ceil(size_of(result) * 2 * STRING_FACTOR)
    if function in ("find", "findAll"):
        return lambda args, result: _ceil((1 + size_of(args[0])) * STRING_FACTOR) * _ceil(size_of(args[1]) * REGEX_FACTOR)
    if function == "ip":
        return 1 if overload == "cidr_ip" else _string_scan(STRING_FACTOR)
    if function == "ip.isCanonical":
        return _string_scan(2 * STRING_FACTOR)
    if function in _NOMINAL:
        return 1
    if function == "containsIP":
        extra = overload == "cidr_contains_ip_string"
        return lambda args, result: _ceil(size_of(args[0]) * 2 * STRING_FACTOR) + (_ceil(size_of(args[1]) * STRING_FACTOR) if extra else 0)
    if function == "containsCIDR":
        extra = overload == "cidr_contains_cidr_string"
        return lambda args, result: (
            _ceil(size_of(args[0]) * 2 * STRING_FACTOR) + _ceil(size_of(args[0]) * STRING_FACTOR) + 1
            + (_ceil(size_of(args[1]) * STRING_FACTOR) if extra else 0)
        )  # fmt: skip
    if function == "validate":
        return lambda args, result: _ceil((1 + size_of(args[1])) * STRING_FACTOR) * _ceil(args[0].max_regex_size * REGEX_FACTOR)
    if function == "_==_":
        from kube.cel.library import DEFAULT_RUNTIME_COSTS

        default = DEFAULT_RUNTIME_COSTS["equals"]
        return lambda args, result: 1 if isinstance(args[0], _KUBERNETES_VALUES) else default(args, result)
    return None


Sizer = Callable[[AstNode], Estimate]


def _element_node(node: AstNode) -> AstNode | None:
    if node.type.params and node.type.name == "list":
        path = [*node.path, "@items"] if node.path else None
        return AstNode(path, node.type.params[0], None, None)
    return None


def estimate_call_cost(function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    """Kubernetes' estimated cost of a library call (None: use cel-go's default)."""
    if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
        if target is None:
            return None
        elem = _element_node(target)
        if elem is not None:
            el_cost = ONE
            if elem.type.kind in (STRING_K, BYTES_K):
                el_cost = el_cost + size(elem).factor(STRING_FACTOR)
            return CallEstimate(size(target) * el_cost)
        return CallEstimate(size(target).factor(STRING_FACTOR))
    if function == "url" and len(args) == 1:
        sz = size(args[0])
        return CallEstimate(sz.factor(STRING_FACTOR), sz)
    if function in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
        sz = size(target)
        return CallEstimate(sz.factor(STRING_FACTOR), sz)
    if function == "replace" and target is not None and len(args) >= 2:
        return _estimate_replace(size(target), size(args[0]), size(args[1]))
    if function == "split" and target is not None:
        sz = size(target)
        top = sz.max
        if len(args) > 1 and args[1].expr is not None and type(getattr(args[1].expr, "value", None)) is int:
            top = args[1].expr.value % 2**64  # type: ignore[attr-defined]
        return CallEstimate(sz.factor(2 * STRING_FACTOR), Estimate(0, top))
    if function == "join" and target is not None:
        list_size = size(target)
        sz = Estimate(0, 0)
        elem = _element_node(target)
        if elem is not None:
            sz = list_size * size(elem)
        if args:
            sep = size(args[0])
            sz = sz + sep * Estimate(max(list_size.min - 1, 0), max(list_size.max - 1, 0))
        return CallEstimate(sz.factor(STRING_FACTOR), sz)
    if function in ("find", "findAll") and target is not None and args:
        sz = size(target)
        str_cost = (sz + ONE).factor(STRING_FACTOR)
        regex_cost = size(args[0]).factor(REGEX_FACTOR)
        return CallEstimate(str_cost * regex_cost, Estimate(0, sz.max))
    if function in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args and target is None:
        return CallEstimate(size(args[0]).factor(STRING_FACTOR))
    if function == "ip":
        if overload == "cidr_ip":
            return CallEstimate(ONE)
        if args:
            return CallEstimate(size(args[0]).factor(STRING_FACTOR))
    if function == "ip.isCanonical" and args:
        return CallEstimate(size(args[0]).factor(2 * STRING_FACTOR))
    if function in _NOMINAL:
        return CallEstimate(ONE)
    if function == "containsIP" and target is not None and args:
        sz = Estimate(4, 16)
        c = (sz + sz).factor(STRING_FACTOR)
        if overload == "cidr_contains_ip_string":
            c = c + size(args[0]).factor(STRING_FACTOR)
        return CallEstimate(c)
    if function == "containsCIDR" and target is not None and args:
        sz = Estimate(4, 16)
        c = (sz + sz).factor(STRING_FACTOR) + sz.factor(STRING_FACTOR) + ONE
        if overload == "cidr_contains_cidr_string":
            c = c + size(args[0]).factor(STRING_FACTOR)
        return CallEstimate(c)
    if function == "validate" and target is not None:
        return CallEstimate(size(args[0]).factor(STRING_FACTOR).factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_FACTOR))
    if function == "_==_" and len(args) == 2:
        lhs, rhs = args
        if lhs.type == rhs.type:
            t = lhs.type
            if t.kind == OPAQUE_K and t.name in ("net.IP", "net.CIDR"):
                return CallEstimate(ONE)
            if t.kind == STRUCT_K:
                if t.name in ("kubernetes.Quantity", "kubernetes.Semver"):
                    return CallEstimate(ONE)
                if t.name == "kubernetes.NamedFormat":
                    return CallEstimate(Estimate(1, MAX_FORMAT_SIZE).factor(STRING_FACTOR))
                if t.name == "kubernetes.URL":
                    sz = fixed(1)
                    if rhs.computed_size is not None:
                        sz = rhs.computed_size.union(rhs.computed_size)
                    return CallEstimate(Estimate(1, sz.max).factor(STRING_FACTOR))
    return None


def _estimate_replace(sz: Estimate, to_replace: Estimate, replace_with: Estimate) -> CallEstimate:
    u64 = 2**64 - 1
    if to_replace.min == 0:
        count_max = sz.max + 1 if sz.max < u64 else sz.max
        retained_max = sz.max
    elif replace_with.max <= to_replace.min:
        count_max, retained_max = 0, sz.max
    else:
        count_max, retained_max = math.ceil(sz.max / to_replace.min), 0
    if to_replace.max == 0:
        count_min = sz.min + 1 if sz.min < u64 else sz.min
        retained_min = sz.min
    elif to_replace.max <= replace_with.min:
        count_min, retained_min = 0, sz.min
    else:
        count_min, retained_min = math.ceil(sz.min / to_replace.max), 0
    result = Estimate(count_min, count_max) * replace_with + Estimate(retained_min, retained_max)
    return CallEstimate(sz.factor(2 * STRING_FACTOR), result)


def dra_includes() -> Function:
    return fn("includes", ov("dra_includes_dyn_dyn", (DYN, DYN), BOOL, includes, member=True))


def estimate_dra_includes(function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is None:
        return None
    return CallEstimate(Estimate(0, MAX_ATTRIBUTE_VALUES) * ONE)
