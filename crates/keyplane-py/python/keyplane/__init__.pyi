from ._keyplane import (
    CapacityError as CapacityError,
    CorruptError as CorruptError,
    DeltaMismatchError as DeltaMismatchError,
    InvalidParameterError as InvalidParameterError,
    KeyplaneError as KeyplaneError,
    Lookup as Lookup,
    Table as Table,
    UnsupportedError as UnsupportedError,
    ValueTooWideError as ValueTooWideError,
    WrongKindError as WrongKindError,
    __version__ as __version__,
    structures as structures,
)
from . import keys as keys
