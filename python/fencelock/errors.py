"""Errors: one class per kind of DESIGN.md §5, all under :class:`LockError`.

The native module raises with the core error's fields — kind code, message, lock, backend and whether a retry may
help — and :data:`_CLASSES` below is the one table that maps codes to classes. Catch :class:`LockError` for every fencelock failure, or a subclass for one kind. Codes, not messages, are
API: branch on the class or on ``err.kind``, never on the text.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Dict, Optional, Type

from . import _native

__all__ = [
    "ErrorKind",
    "LockError",
    "Timeout",
    "LockLost",
    "NotHeld",
    "Fenced",
    "Unavailable",
    "InvalidArgument",
    "Unsupported",
    "Closed",
    "Cancelled",
    "Internal",
]


class ErrorKind(enum.Enum):
    """What went wrong, as the code every language shares (the value is the numeric code of DESIGN.md §5)."""

    TIMEOUT = 1
    LOCK_LOST = 2
    NOT_HELD = 3
    FENCED = 4
    UNAVAILABLE = 5
    INVALID_ARGUMENT = 6
    UNSUPPORTED = 7
    CLOSED = 8
    CANCELLED = 9
    INTERNAL = 10

    @property
    def code(self) -> int:
        """The numeric code (1–10), the same as C's ``fencelock_status``."""
        return int(self.value)

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again later may succeed (core's table: TIMEOUT and UNAVAILABLE)."""
        return _native.retryable(self.value)


class LockError(Exception):
    """Base class of every fencelock error; ``kind`` says which, ``retryable`` whether a retry may help, ``lock`` and
    ``backend`` (its URL without secrets) where it happened, when known."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        lock: Optional[str] = None,
        backend: Optional[str] = None,
        retryable: Optional[bool] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.lock = lock
        """The lock the error is about, if any."""
        self.backend = backend
        """The backend it came from (URL without secrets), if known."""
        self._retryable = retryable

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again later may succeed, as core reported it."""
        return self.kind.retryable if self._retryable is None else self._retryable


class Timeout(LockError, TimeoutError):
    """``lock`` waited its ``timeout`` while someone else held the lock."""

    kind = ErrorKind.TIMEOUT


class LockLost(LockError):
    """The lease expired, was taken, or could not be renewed in time; only fenced writes are safe now."""

    kind = ErrorKind.LOCK_LOST


class NotHeld(LockError):
    """Renew or release of a lease that is no longer ours (e.g. released twice)."""

    kind = ErrorKind.NOT_HELD


class Fenced(LockError):
    """A fenced write carried a token older than one the register already accepted."""

    kind = ErrorKind.FENCED


class Unavailable(LockError, ConnectionError):
    """The backend is unreachable, a request timed out, or there is no quorum."""

    kind = ErrorKind.UNAVAILABLE


class InvalidArgument(LockError, ValueError):
    """A bad URL, name (1–512 bytes, no NUL), TTL (1 ms – 24 h) or option."""

    kind = ErrorKind.INVALID_ARGUMENT


class Unsupported(LockError):
    """The backend lacks the capability asked for."""

    kind = ErrorKind.UNSUPPORTED


class Closed(LockError):
    """The client was closed (or was made before ``fork()`` and is used in the child)."""

    kind = ErrorKind.CLOSED


class Cancelled(LockError):
    """The caller cancelled the operation."""

    kind = ErrorKind.CANCELLED


class Internal(LockError):
    """A bug or an unexpected reply from the backend."""

    kind = ErrorKind.INTERNAL


# The one table from codes to classes.
_CLASSES: Dict[ErrorKind, Type[LockError]] = {
    cls.kind: cls
    for cls in (Timeout, LockLost, NotHeld, Fenced, Unavailable, InvalidArgument, Unsupported, Closed, Cancelled, Internal)
}


def _from_code(
    code: int, message: str, lock: Optional[str] = None, backend: Optional[str] = None, retryable: bool = False
) -> LockError:
    """The exception for a native error, from its fields: the class from the table, Internal for an unknown code."""
    try:
        kind = ErrorKind(code)
    except ValueError:
        return Internal(f"unknown error code {code}: {message}", lock=lock, backend=backend, retryable=retryable)
    return _CLASSES[kind](message, lock=lock, backend=backend, retryable=retryable)


_native.set_error_factory(_from_code)
