"""keyplane: compact, fast, dynamic key→value lookup tables for network data planes.

Two forms of every table:

* :class:`Table` — the control form: keeps every key, builds the table and
  turns each ``insert``/``remove`` into *delta* bytes;
* :class:`Lookup` — the data-plane form: small, answers ``get``/``get_many``,
  applies deltas in place, serialises with ``to_bytes``/``from_bytes``.

Keys are ``bytes``, ``str`` (UTF-8) or ``int`` (0..2**64, stored as 8
little-endian bytes — the same encoding as the CLI's ``--key-format u64``),
or NumPy arrays of them.

>>> import keyplane
>>> t = keyplane.Table.build([b"10.0.0.1", b"10.0.0.2"], [5, 7], value_bits=8)
>>> lookup = keyplane.Lookup.from_bytes(t.export().to_bytes())
>>> lookup.get(b"10.0.0.1")
5
>>> lookup.apply(t.insert(b"10.0.0.3", 9))
>>> lookup.get(b"10.0.0.3")
9
"""

from ._keyplane import (  # noqa: F401
    CapacityError,
    CorruptError,
    DeltaMismatchError,
    InvalidParameterError,
    KeyplaneError,
    Lookup,
    Table,
    UnsupportedError,
    ValueTooWideError,
    WrongKindError,
    __version__,
    structures,
)
from . import keys  # noqa: F401  (key encodings matching the CLI's --key-format)

__all__ = [
    "Table",
    "Lookup",
    "structures",
    "KeyplaneError",
    "CorruptError",
    "WrongKindError",
    "DeltaMismatchError",
    "ValueTooWideError",
    "InvalidParameterError",
    "CapacityError",
    "UnsupportedError",
    "__version__",
    "keys",
]
