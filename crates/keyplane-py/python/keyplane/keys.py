"""Key encodings matching the ``keyplane`` command's ``--key-format``.

A table built by the CLI with ``--key-format ipv4`` holds 4-byte keys, so
Python must look it up with the same bytes::

    >>> from keyplane import keys
    >>> keys.ipv4("10.0.0.2")
    b'\\n\\x00\\x00\\x02'
    >>> keys.name("www.example.com") == keys.name("/com/example/www")
    True

Every function returns ``bytes``; malformed input raises ``ValueError``.
"""

from __future__ import annotations

import ipaddress

__all__ = ["text", "hex", "u64", "ipv4", "ipv6", "mac", "name", "fivetuple", "parse"]


def text(s: str) -> bytes:
    """``--key-format text``: the UTF-8 bytes of ``s``."""
    return s.encode("utf-8")


def hex(s: str) -> bytes:  # noqa: A001 - mirrors the CLI's format name
    """``--key-format hex``: hex digits (an optional ``0x`` prefix)."""
    body = s[2:] if s.startswith("0x") else s
    if len(body) % 2:
        raise ValueError(f"hex key {body!r} has an odd number of digits")
    try:
        return bytes.fromhex(body)
    except ValueError:
        raise ValueError(f"bad hex key {body!r}") from None


def u64(x: int | str) -> bytes:
    """``--key-format u64``: 8 little-endian bytes (decimal or ``0x`` text, or an int)."""
    if isinstance(x, str):
        try:
            x = int(x, 16) if x.startswith("0x") else int(x, 10)
        except ValueError:
            raise ValueError(f"bad u64 key {x!r}") from None
    if not 0 <= x < 1 << 64:
        raise ValueError(f"u64 key {x} out of range")
    return int(x).to_bytes(8, "little")


def ipv4(s: str) -> bytes:
    """``--key-format ipv4``: the 4 address bytes, network order."""
    try:
        return ipaddress.IPv4Address(s).packed
    except ValueError:
        raise ValueError(f"bad IPv4 address {s!r}") from None


def ipv6(s: str) -> bytes:
    """``--key-format ipv6``: the 16 address bytes, network order."""
    try:
        return ipaddress.IPv6Address(s).packed
    except ValueError:
        raise ValueError(f"bad IPv6 address {s!r}") from None


def mac(s: str) -> bytes:
    """``--key-format mac``: 6 bytes from ``aa:bb:cc:dd:ee:ff`` (or ``-`` separators)."""
    parts = s.replace("-", ":").split(":")
    if len(parts) != 6 or any(len(p) != 2 for p in parts):
        raise ValueError(f"bad MAC address {s!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"bad MAC address {s!r}") from None


def name(s: str) -> bytes:
    """``--key-format name``: ``/com/example/www`` or ``www.example.com`` as
    ``/``-prefixed, lower-cased components, most significant first."""
    if "/" in s or "." not in s:
        comps = [c for c in s.split("/") if c]
    else:
        comps = [c for c in s.split(".") if c][::-1]
    out = bytearray()
    for c in comps:
        b = c.encode("utf-8")
        if len(b) > 255:
            raise ValueError(f"name {s[:80]!r} has a component over 255 bytes")
        out += b"/" + bytes(ch + 32 if 65 <= ch <= 90 else ch for ch in b)
    return bytes(out)


def fivetuple(src: str, dst: str, src_port: int, dst_port: int, proto: int) -> bytes:
    """A transport 5-tuple as the CLI's generated ``fivetuple`` keys and
    ``keyplane::key::FiveTuple::key``: ``src ‖ dst ‖ sport ‖ dport ‖ proto``,
    addresses 4 bytes each when both are IPv4, otherwise 16 (IPv4-mapped),
    ports big-endian."""
    a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if a.version == 4 and b.version == 4:
        addrs = a.packed + b.packed
    else:
        def six(x: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bytes:
            return ipaddress.IPv6Address("::ffff:" + str(x)).packed if x.version == 4 else x.packed

        addrs = six(a) + six(b)
    for p, what in ((src_port, "src_port"), (dst_port, "dst_port")):
        if not 0 <= p <= 0xFFFF:
            raise ValueError(f"{what} {p} out of range")
    if not 0 <= proto <= 0xFF:
        raise ValueError(f"proto {proto} out of range")
    return addrs + src_port.to_bytes(2, "big") + dst_port.to_bytes(2, "big") + bytes([proto])


_FORMATS = {"text": text, "hex": hex, "u64": u64, "ipv4": ipv4, "ipv6": ipv6, "mac": mac, "name": name}


def parse(fmt: str, s: str) -> bytes:
    """Encodes ``s`` per a CLI ``--key-format`` name."""
    try:
        return _FORMATS[fmt](s)
    except KeyError:
        raise ValueError(f"unknown key format {fmt!r} (expected one of {', '.join(_FORMATS)})") from None
