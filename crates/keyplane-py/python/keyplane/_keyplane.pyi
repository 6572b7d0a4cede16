"""Type stubs for the keyplane extension module."""

from typing import Iterable, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

Key = Union[bytes, bytearray, memoryview, str, int]
Keys = Union[Iterable[Key], npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.bytes_]]
Values = Union[Iterable[int], npt.NDArray[np.uint64], npt.NDArray[np.int64]]
OptionValue = Union[int, bool, str]

__version__: str

class KeyplaneError(Exception):
    """Base class of every keyplane error."""

class CorruptError(KeyplaneError):
    """Bytes that are not a valid keyplane blob or delta (bad magic, truncated, checksum mismatch, unsupported version)."""

class WrongKindError(KeyplaneError):
    """A valid keyplane object of the wrong kind (a delta passed as a blob, another structure's delta)."""

class DeltaMismatchError(KeyplaneError):
    """A delta that does not fit this table (out of order, lost, repeated, from another table); the table is unchanged."""

class ValueTooWideError(KeyplaneError):
    """A value wider than the table's value_bits (values are never truncated)."""

class InvalidParameterError(KeyplaneError):
    """An unknown structure or option, or an option or value_bits out of range."""

class CapacityError(KeyplaneError):
    """Construction failed or the table cannot hold more keys with its parameters."""

class UnsupportedError(KeyplaneError):
    """The structure does not support this operation or blob kind."""

class Table:
    """The control form: keeps every key and value, builds the table, and
    turns each update into delta bytes for lookup forms.

    ``Table(structure="othello", value_bits=8, **options)`` is an empty table;
    options are the structure's build options (``keyplane.structures()``),
    e.g. ``fingerprint_bits=8, emptiness=True`` or ``filtered=8`` for Othello.
    """

    def __init__(self, structure: str = "othello", value_bits: int = 8, **options: OptionValue) -> None: ...
    @staticmethod
    def build(keys: Keys, values: Values, structure: str = "othello", value_bits: int = 8, **options: OptionValue) -> "Table":
        """Bulk construction from keys and values of equal length; a repeated key: the last value wins."""
    def insert(self, key: Key, value: int) -> bytes:
        """Inserts or overwrites a key; returns the delta for lookup forms. Raises ValueTooWideError."""
    def remove(self, key: Key) -> Optional[bytes]:
        """Removes a key; returns the delta, or None when the key was absent."""
    def get(self, key: Key) -> Optional[int]:
        """The value of a key, or None (exact)."""
    def export(self) -> "Lookup":
        """A fresh lookup form of the current state."""
    @property
    def structure(self) -> str: ...
    @property
    def value_bits(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: Key) -> bool: ...

class Lookup:
    """The data-plane form: answers lookups, applies deltas in place,
    serialises to a checksummed blob. Safe to share between threads."""

    @staticmethod
    def from_bytes(data: bytes) -> "Lookup":
        """Decodes a blob of any structure. Raises CorruptError or WrongKindError."""
    def to_bytes(self) -> bytes:
        """The framed, checksummed blob."""
    def get(self, key: Key) -> Optional[int]:
        """The value of a key; None when the structure can tell it is absent."""
    def get_many(self, keys: Keys) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Vectorised lookup: (values, found); values are 0 where absent."""
    def get_u64_array(self, keys: npt.NDArray[np.uint64]) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Typed lookup of a 1-D uint64 array (8-byte little-endian keys): (values, found), as get_many."""
    def get_batch_u64(self, keys: npt.NDArray[np.uint64]) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Typed batched lookup of a 1-D uint64 array (the typed batch path, prefetching): (values, found), as get_u64_array."""
    def apply(self, delta: bytes) -> None:
        """Applies one delta or several concatenated deltas. Raises DeltaMismatchError, CorruptError, WrongKindError."""
    def describe(self) -> list[Tuple[str, str]]:
        """Structure parameters as (name, value) strings."""
    @property
    def structure(self) -> str: ...
    @property
    def kind(self) -> int: ...
    @property
    def value_bits(self) -> Optional[int]: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def detects_absent(self) -> bool: ...
    def __getitem__(self, key: Key) -> int: ...
    def __contains__(self, key: Key) -> bool: ...

def structures() -> list[Tuple[str, str, list[Tuple[str, str]]]]:
    """(name, summary, [(option, help)]) for every structure in this build."""
