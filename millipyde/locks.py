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

An array's commit lock is made on its first use, under ``member.LOCK`` (:func:`commit_lock`;
a private handle no other thread sees may be given one directly). So while a thread holds
``member.LOCK``, an array with no commit lock has no update in progress and none can start:
a chunk's commit, which holds ``member.LOCK`` across the chunk, binds such an input as if it
held its lock, with no lock made or taken (a Pipeline's fresh inputs, and its outputs that
nothing but Pipelines updated since, have none).

Deadlock freedom: a thread holds at most one array's commit lock at a time (nothing that runs
under it takes another array's lock, and the run-wide locks taken under it are never held
while waiting for a commit lock), so no cycle of waits can form, whatever order two Pipelines
claim overlapping inputs in. A chunk's commit (``array.bind_members``) holds its run's lock and
``member.LOCK`` across the chunk and only tries each input's lock under them, one at a time
(one held elsewhere is waited for afterwards, without them): it never waits while holding
them. (It may wait holding its run's host lock, ``Run.host``, which is never taken under a
commit lock.) A lock is made under ``member.LOCK`` holding no commit lock, and nothing is
waited for under it. (A Python callable Operation that itself calls methods on *another*
input of a running Pipeline steps outside this rule.)
"""

from __future__ import annotations

import _thread
import threading
from typing import Any

from .graph.ir import member


def commit_lock(x: Any) -> threading.RLock:
    """The commit lock of gpuarray ``x`` (made on first use, under ``member.LOCK``: see the
    module's docstring; reentrant, for method aliases)."""
    d = x.__dict__
    lock = d.get("_commit_lock")
    if lock is None:
        # (two threads that race here both get the lock stored first: ``setdefault``)
        with member.LOCK:
            lock = d.setdefault("_commit_lock", _thread.RLock())
    return lock
