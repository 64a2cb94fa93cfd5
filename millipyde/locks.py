"""One commit lock per gpuarray: what makes concurrent updates of one array serial.

A Pipeline worker processing one input holds its lock from the moment it reads the input's
value (claim) until it binds the computed value (commit); a worker processing a chunk of inputs
at once (``pipeline.run``) reads their values without it and binds each output under the
input's lock only if the input still holds the value read (else that input is processed again,
claimed as above); an image method holds it while it draws its parameters and records its node,
as do a move to the array's pinned device (``gpuarray._placed``) and a ufunc that writes the
array (``out=``) while they read and bind it. Every update of an array is therefore applied to
the value the previous update left, exactly once, in some serial order, whatever threads and
Pipelines race.

Deadlock freedom: a thread holds at most one array's commit lock at a time (nothing that runs
under it takes another array's lock, and the run-wide locks taken under it are never held
while waiting for a commit lock), so no cycle of waits can form, whatever order two Pipelines
claim overlapping inputs in. A chunk's commit (``array.bind_members``) holds its run's lock and
``member.LOCK`` across the chunk and only tries each input's lock under them, one at a time
(one held elsewhere is waited for afterwards, without them): it never waits while holding
them. (A Python callable Operation that itself calls methods on *another* input of a running
Pipeline steps outside this rule.)
"""

from __future__ import annotations

import _thread
import threading
from typing import Any


def commit_lock(x: Any) -> threading.RLock:
    """The commit lock of gpuarray ``x`` (made on first use; reentrant, for method aliases)."""
    d = x.__dict__
    lock = d.get("_commit_lock")
    if lock is None:
        # ``setdefault`` is one atomic dict operation: two threads that race here both get
        # the lock stored first (the other new one is dropped), with no global lock taken on
        # every fresh array's first method (a bench's fresh clone per call)
        lock = d.setdefault("_commit_lock", _thread.RLock())
    return lock
