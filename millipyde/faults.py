"""Fault injection for reliability tests: make a chosen point raise, run out of memory or hang.

Tests arm a fault with :func:`inject`; the runtime calls :func:`check` at its hook points
("alloc", "op:<name>") with the device index. Nothing is armed in normal use, and the check is one
dictionary lookup.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

_lock = threading.Lock()
_armed: dict[str, _Fault] = {}
#: the armed faults (empty in normal use): a hot path that skips ``check``'s calls tests this
#: first and takes the checked path when it is not empty
ARMED = _armed


class InjectedFault(RuntimeError):
    """Raised by an armed ``raise`` fault."""


class InjectedOutOfMemory(MemoryError):
    """Raised by an armed ``oom`` fault."""


@dataclass
class _Fault:
    kind: str
    device: int | None
    at_call: int
    calls: int = 0
    seconds: float = 3600.0


def inject(point: str, kind: str = "raise", *, device: int | None = None, at_call: int = 1,
           seconds: float = 3600.0) -> None:
    """Arm a fault at ``point`` ("alloc", "op:gaussian", ...) for the ``at_call``-th hit.

    ``kind`` is "raise", "oom" or "hang" (sleeps ``seconds``). ``device`` limits it to one device.
    """
    if kind not in ("raise", "oom", "hang"):
        raise ValueError(f"fault kind must be 'raise', 'oom' or 'hang', got {kind!r}")
    with _lock:
        _armed[point] = _Fault(kind, device, at_call, seconds=seconds)


def clear() -> None:
    """Disarm every fault."""
    with _lock:
        _armed.clear()


def check(point: str, device: int) -> None:
    """Fire the fault armed at ``point`` if this is its call on its device."""
    if not _armed:
        return
    with _lock:
        f = _armed.get(point)
        if f is None or (f.device is not None and f.device != device):
            return
        f.calls += 1
        if f.calls != f.at_call:
            return
    if f.kind == "raise":
        raise InjectedFault(f"injected fault at {point} on device {device}")
    if f.kind == "oom":
        raise InjectedOutOfMemory(f"injected out-of-memory at {point} on device {device}")
    time.sleep(f.seconds)
