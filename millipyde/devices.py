"""Devices of the active backend: ranking, peer access, ``synchronize`` and the ``Device`` scope.

Thesis section 4.2: the recommended device has the largest multiprocessors x clock; a peer-access
matrix decides direct device-to-device copies; ``Device(i)`` sets the target for a ``with`` block
(per thread, nesting), synchronizes on a normal exit and resets millipyde's state for the device
when the block raised.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

import numpy as np

from .backend import ACTIVE, DeviceInfo

__all__ = ["DEVICES", "DEVICE_COUNT", "Device", "DeviceInfo", "can_peer", "check_device",
           "device_count", "get_current_device", "get_device_count", "on_reset", "reset",
           "synchronize", "target_device", "targeting"]


DEVICES: list[DeviceInfo] = ACTIVE.device_infos()
#: number of devices of the active backend (read at import; :func:`device_count` gives the same)
DEVICE_COUNT: int = len(DEVICES)
# enabling peer access between GPUs happens here, once
PEER_ACCESS: np.ndarray = ACTIVE.peer_matrix(DEVICE_COUNT)
RECOMMENDED: int = max(DEVICES, key=lambda d: (d.score, -d.index)).index
RANKED: list[int] = [d.index for d in sorted(DEVICES, key=lambda d: (-d.score, d.index))]

class _Targets(threading.local):
    """Per thread: the stack of ``Device`` / ``targeting`` indices (None until the first).
    A class default, not a missing attribute: every op record reads it, and ``getattr`` of a
    missing attribute of a thread-local costs ~0.4 us (the AttributeError raised and caught)
    against ~0.05 us."""

    stack: list[int] | None = None


#: this thread's ``Device`` / ``targeting`` stack (an op's record reads it directly)
TARGETS = _Targets()
_reset_hooks: list[Callable[[int], None]] = []


def can_peer(src: int, dst: int) -> bool:
    """Whether ``dst`` can read ``src``'s memory directly."""
    return bool(PEER_ACCESS[src, dst])


def get_device_count() -> int:
    """Number of usable devices of the active backend."""
    return DEVICE_COUNT


device_count = get_device_count


def synchronize(device: int | None = None) -> None:
    """Wait for all queued work on ``device`` (every device when None)."""
    ACTIVE.synchronize(device)


def target_device() -> int | None:
    """The device set by the innermost ``with Device(i)`` in this thread, or None."""
    stack = getattr(TARGETS, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def targeting(index: int) -> Iterator[None]:
    """Target ``index`` in this thread for a block, without ``Device``'s synchronize or reset.

    Worker threads use it so arrays they create (clones, user callables' results) land on the
    worker's device; a failure there is the executor's to report, not a reason to reset.
    """
    stack = getattr(TARGETS, "stack", None)
    if stack is None:
        stack = TARGETS.stack = []
    stack.append(index)
    try:
        yield
    finally:
        stack.pop()


def get_current_device() -> int:
    """The current target device (the recommended device when none is set)."""
    t = target_device()
    return RECOMMENDED if t is None else t


def check_device(index: object, what: str = "device") -> int:
    """Validate a device index, returning it as an int; ``ValueError`` otherwise."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"{what} must be an int device index, got {type(index).__name__}")
    if not 0 <= int(index) < DEVICE_COUNT:
        raise ValueError(
            f"{what} {int(index)} is not a valid device: the {ACTIVE.name} backend has "
            f"{DEVICE_COUNT} device(s), 0..{DEVICE_COUNT - 1}"
        )
    return int(index)


def on_reset(hook: Callable[[int], None]) -> None:
    """Register ``hook(device)`` to drop a component's state when a Device block fails."""
    _reset_hooks.append(hook)


def reset(device: int) -> None:
    """Drop millipyde's state for ``device``: pools, streams, pending work; leave it usable."""
    for hook in list(_reset_hooks):
        hook(device)
    if ACTIVE.caps.launches_on_streams:
        try:
            ACTIVE.synchronize(device)
        except Exception:
            # The failed work's error already reached the caller; the device must stay usable.
            pass


class Device:
    """Context manager that targets device ``index`` inside a ``with`` block (nests)."""

    def __init__(self, index: int) -> None:
        self.index = check_device(index, "Device index")

    def __enter__(self) -> Device:
        stack = getattr(TARGETS, "stack", None)
        if stack is None:
            stack = TARGETS.stack = []
        stack.append(self.index)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                ACTIVE.synchronize(self.index)
            else:
                reset(self.index)
        finally:
            TARGETS.stack.pop()

    def __repr__(self) -> str:
        return f"Device({self.index})"
