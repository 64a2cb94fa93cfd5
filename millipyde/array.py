"""``gpuarray``: a handle on a node of the operation graph whose value lives on a device.

Methods record nodes and move the handle; ``np.asarray``/``np.array``/``clone`` materialize.
NumPy, CUDA Array Interface and DLPack protocols make it work with NumPy, PyTorch and CuPy.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from . import devices
from .backend import ACTIVE, dlpack
from .graph.exec import execute
from .graph.ir import lazy, member
from .graph.ir.lazy import LazyArray, to_host_tree
from .graph.ir.member import Member
from .graph.ir.node import Node, apply, leaf
from .locks import commit_lock
from .random import next_sample_index

_NUMERIC_KINDS = "biufc"


class ArgumentError(ValueError, TypeError):
    """An invalid argument: catchable as ``ValueError`` or ``TypeError``."""


def _host_array(obj: Any, what: str) -> np.ndarray:
    """``obj`` as a native-endian, C-contiguous host array; ``ValueError`` if not numeric."""
    if obj is None:
        raise ValueError(f"{what} needs array-like numeric data, got None")
    if isinstance(obj, (str, bytes)):
        raise ValueError(f"{what} needs array-like numeric data, got {type(obj).__name__}")
    try:
        arr = np.asarray(obj)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{what} needs a rectangular numeric array: {err}") from err
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"{what} needs a numeric dtype, got {arr.dtype}")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    # not ascontiguousarray: it turns 0-d arrays into 1-d ones
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _from_device_object(obj: Any, device: int) -> tuple[Any, tuple[int, ...], np.dtype] | None:
    """Copy a CUDA Array Interface / DLPack object device-to-device, or None if not one."""
    if not ACTIVE.caps.external_memory:
        return None
    from numba import cuda

    src = None
    if hasattr(obj, "__cuda_array_interface__"):
        src = cuda.as_cuda_array(obj)
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev_type, _ = obj.__dlpack_device__()
        if int(dev_type) == 2:  # kDLCUDA
            import cupy

            src = cuda.as_cuda_array(cupy.from_dlpack(obj))
    if src is None:
        return None
    if src.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"gpuarray needs a numeric dtype, got {src.dtype}")
    shape = tuple(src.shape)
    buf = ACTIVE.empty(shape or (1,), src.dtype, device)
    with ACTIVE.on_device(device):
        if not src.is_c_contiguous():
            src = cuda.as_cuda_array(_contiguous_copy(obj))
        buf.copy_to_device(src.reshape(shape or (1,)), stream=ACTIVE.current_stream())
    return buf, shape, src.dtype


def _contiguous_copy(obj: Any) -> Any:
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(obj))


class _MemberNode:
    """``gpuarray._node`` of an array without a ``_node`` of its own: one bound to a member of
    a batch buffer (``gpuarray._bind_member``) makes the member's node on this first read and
    holds it from then on. A non-data descriptor: an array's own ``_node`` is found before it,
    at no cost."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        for _ in range(_RETRIES):
            m = d.get("_member")
            if m is None:
                node = d.get("_node")
                if node is not None:
                    return node
                # (a bind between the two reads: a bind sets the new key before it drops the
                # old one, so an array always holds one of them; look again)
                continue
            with member.LOCK:
                node = d.get("_node")
                if node is not None:  # another thread read it (or bound a node) first
                    return node
                if d.get("_member") is m:
                    node = m.node()
                    node.users += 1
                    d["_node"] = node
                    del d["_member"]
                    return node
            # bound to another member meanwhile: read that one
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute '_node'")


#: Reads of ``_node`` that ``_MemberNode`` tries while binds move it (one takes one or two)
_RETRIES = 8


class gpuarray(LazyArray):  # noqa: N801  (the thesis's public name)
    """An n-dimensional numeric array on the current target device.

    Parameters
    ----------
    obj : array_like
        Any numeric array-like (NumPy, lists, PyTorch/CuPy tensors through the CUDA Array
        Interface or DLPack, another gpuarray). ``None``, strings, objects and ragged lists
        raise ``ValueError``.
    """

    __array_priority__ = 100
    _node = _MemberNode()

    def __init__(self, obj: Any) -> None:
        self._node: Node | None = None
        self._pinned: int | None = None
        self._sample = next_sample_index()
        self._opcount = 0
        device = devices.get_current_device()
        if isinstance(obj, gpuarray):
            self._bind(apply("copy", obj._node, (), obj.shape, obj.dtype, device=device))
            self._validate_device_copy()
            return
        moved = _from_device_object(obj, device)
        if moved is not None:
            buf, shape, dtype = moved
            host = None
        else:
            host = self._convert(_host_array(obj, type(self).__name__))
            shape, dtype = host.shape, host.dtype
            buf = ACTIVE.from_host(host.reshape(host.shape or (1,)), device)
        self._bind(leaf(buf, shape, dtype, device))
        if host is None:
            self._validate_device_copy()

    # -- construction hooks (gpuimage overrides) ------------------------------------------
    def _convert(self, host: np.ndarray) -> np.ndarray:
        return host

    def _validate_device_copy(self) -> None:
        """Check data that arrived without a host copy (gpuimage re-checks shape rules)."""

    # -- graph plumbing ------------------------------------------------------------------
    # An array holds its value in ``_node``, or, bound to a member of a computed batch buffer
    # (a Pipeline chunk's output, ``graph.ir.member``), in ``_member`` with no ``_node``: the
    # class attribute ``_node`` (``_MemberNode``) then makes the member's node on first read.
    def _bind(self, node: Node) -> None:
        d = self.__dict__
        # ``_member`` looked up first: a read converting it sets ``_node`` before it drops
        # ``_member``, so one found here is dropped under the lock with the node it left
        # (looked up after ``_node``, a conversion in between would go unseen, its node's
        # ``users`` never given back)
        if "_member" in d:
            self._bind_from_member(node)
            return
        old = d.get("_node")
        node.users += 1
        d["_node"] = node
        if old is not None:
            old.users -= 1

    def _bind_from_member(self, node: Node) -> None:
        with member.LOCK:  # (a read may be converting the member binding meanwhile)
            d = self.__dict__
            old = d.get("_node")
            node.users += 1
            d["_node"] = node
            d.pop("_member", None)
            if old is not None:
                old.users -= 1

    def _bind_member(self, value: Member) -> None:
        """Hold ``value``, a member of a computed batch buffer, without making its node (the
        caller holds the array's commit lock, as every bind does: no other bind runs)."""
        d = self.__dict__
        old = d.get("_node")
        if old is None:  # from a member, which a read may be converting now
            with member.LOCK:
                d["_member"] = value
                old = d.pop("_node", None)
        else:  # (no lock: ``_member`` is set before ``_node`` goes, so a read in between
            # finds the node, and one after it the member; no read converts a node)
            d["_member"] = value
            del d["_node"]
        if old is not None:
            old.users -= 1

    def _bind_value(self, value: Node | Member) -> None:
        """Hold ``value`` (one :meth:`_value` returned)."""
        if isinstance(value, Member):
            self._bind_member(value)
        else:
            self._bind(value)

    def _value(self) -> Node | Member:
        """The value held, without making a member's node: its node, or its member while
        bound to one and not yet read."""
        d = self.__dict__
        node = d.get("_node")
        if node is not None:
            return node
        with member.LOCK:  # (bound to a member: a read or a bind may be moving it now)
            node = d.get("_node")
            return node if node is not None else d["_member"]

    def _holds(self, value: Node | Member) -> bool:
        """Whether the value held is ``value`` (one :meth:`_value` returned), read or not; the
        caller holds the array's commit lock (no bind runs meanwhile).

        No lock is taken (a Pipeline's commit asks it per input): a read converting the
        member meanwhile sets ``_node`` before it drops ``_member``, so ``_member`` is looked
        up first and a conversion after it leaves the member's node in ``_node``."""
        d = self.__dict__
        if type(value) is Member:
            if d.get("_member") is value:
                return True
            made = value.made
            return made is not None and d.get("_node") is made
        return d.get("_node") is value

    def __del__(self) -> None:
        d = self.__dict__  # (not ``_node``: an unread member stays unmade)
        # (no ``dict.get`` call: every output a Generator hands out ends here)
        node = d["_node"] if "_node" in d else None
        if node is not None:
            node.users -= 1

    def _placed(self) -> Node:
        """Thesis Algorithm 1: move to the pinned device, else to an explicit target."""
        node = self._node
        dev = self._pinned if self._pinned is not None else devices.target_device()
        if dev is not None and dev != node.device:
            # read and moved under the commit lock, as every update of an array (locks.py):
            # a Pipeline's commit between the read and the bind would be lost, and a bind
            # racing ``_bind_member``'s (which assumes none) could leave the array no value
            with self.__dict__.get("_commit_lock") or commit_lock(self):
                node = self._node
                if dev != node.device:
                    node = apply("move", node, (), node.shape, node.dtype, device=dev)
                    self._bind(node)
        return node

    def _materialize(self) -> Any:
        """Run all pending work for this array; return its device buffer."""
        d = self.__dict__
        node = d.get("_node")
        if node is None:
            m = d.get("_member")
            if m is not None:  # bound to a member, unread: its view, no node made for it
                return m.view()
            node = self._node
        return execute.materialize(node)

    @classmethod
    def _wrap(cls, node: Node) -> gpuarray:
        """A plain gpuarray handle on ``node`` (results of arithmetic are not images)."""
        return gpuarray._new_like(gpuarray.__new__(gpuarray), node)

    @classmethod
    def from_buffer(cls, buffer: Any, device: int) -> gpuarray:
        """An array of this class whose stored value is ``buffer``, a device buffer of the
        active backend on ``device`` (no copy; its shape and dtype). Nothing is checked: the
        caller passes what the constructor would store (a streamed source's decoded image)."""
        return cls.__new__(cls)._new_like(leaf(buffer, tuple(int(d) for d in buffer.shape),
                                               np.dtype(buffer.dtype), device))

    def _new_like(self, node: Node, sample: int | None = None) -> gpuarray:
        """An array of this one's class holding ``node``, with sample index ``sample`` (None:
        a fresh one)."""
        cls = type(self)
        out = cls.__new__(cls)
        out._pinned = None
        out._sample = next_sample_index() if sample is None else sample
        out._opcount = 0
        node.users += 1  # (``_bind`` of a fresh array: no value held before)
        out._node = node
        return out

    # -- attributes ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Array dimensions, as NumPy."""
        return self._node.shape

    @property
    def dtype(self) -> np.dtype:
        """Element type, as NumPy."""
        return self._node.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._node.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self._node.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of the array's data."""
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> int:
        """Index of the device where the data lives (or will, once pending work runs)."""
        return self._node.device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype}, "
                f"device={self.device})")

    # -- copies --------------------------------------------------------------------------
    def clone(self) -> gpuarray:
        """Deep copy on the current target device (same type as ``self``)."""
        node = apply("copy", self._node, (), self.shape, self.dtype,
                     device=devices.get_current_device())
        return self._new_like(node)

    def explain(self, fuse: bool | None = None) -> Any:
        """The kernels that materializing this array would launch (nothing runs).

        Returns a :class:`millipyde.graph.explain.Plan`: ``kernels`` (one entry per kernel with
        its fused ops, device and bytes), a readable ``str()`` and ``to_png(path)``.
        """
        from .graph.explain import Plan

        return Plan(self._node, fuse=fuse, title=repr(self))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        d = self.__dict__
        node = d["_node"] if "_node" in d else None
        if node is not None and node.buffer is not None:
            # a stored value (a Generator's or a Pipeline's output read once): its buffer,
            # without ``_materialize`` / ``execute.materialize`` / ``shape`` calls per read
            host, shape = ACTIVE.to_host(node.buffer), node.shape
        else:
            host, shape = ACTIVE.to_host(self._materialize()), self.shape
        if host.shape != shape:
            host = host.reshape(shape)
        if dtype is not None and np.dtype(dtype) != host.dtype:
            host = host.astype(dtype)
        return host

    def sum(self, axis: Any = None, **kwargs: Any) -> Any:
        """Sum (lazy map-reduce on the device for a full reduction)."""
        return np.sum(self, axis=axis, **kwargs)

    def mean(self, axis: Any = None, **kwargs: Any) -> Any:
        """Mean (lazy map-reduce on the device for a full reduction)."""
        return np.mean(self, axis=axis, **kwargs)

    def min(self, axis: Any = None, **kwargs: Any) -> Any:
        """Minimum (lazy map-reduce on the device for a full reduction)."""
        return np.min(self, axis=axis, **kwargs)

    def max(self, axis: Any = None, **kwargs: Any) -> Any:
        """Maximum (lazy map-reduce on the device for a full reduction)."""
        return np.max(self, axis=axis, **kwargs)

    def __float__(self) -> float:
        return float(self.__array__())

    def __int__(self) -> int:
        return int(self.__array__())

    def get(self) -> np.ndarray:
        """A host copy, as CuPy's ``get()``."""
        return self.__array__()

    def __getitem__(self, key: Any) -> Any:
        return self.__array__()[key]

    # -- NumPy protocols -----------------------------------------------------------------
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        impl = lazy.FUNCTIONS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return func(*to_host_tree(args), **to_host_tree(kwargs))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and "out" not in kwargs:
            result = lazy.ufunc(ufunc, inputs, kwargs)
            if result is not NotImplemented:
                return result
        out = kwargs.pop("out", None)
        outs = () if out is None else out if isinstance(out, tuple) else (out,)
        mine = [o for o in outs if isinstance(o, gpuarray)]
        # an array written is read and written under its commit lock, as every update of an
        # array (locks.py); several (a thread holds one commit lock at a time) each its write
        with commit_lock(mine[0]) if len(mine) == 1 else contextlib.nullcontext():
            result = getattr(ufunc, method)(*to_host_tree(inputs), **to_host_tree(kwargs))
            if out is None:
                return result
            results = result if isinstance(result, tuple) else (result,)
            for o, r in zip(outs, results, strict=True):
                if isinstance(o, gpuarray):
                    host = np.asarray(r, dtype=o.dtype).reshape(o.shape or (1,))
                    with commit_lock(o):
                        o._bind(leaf(ACTIVE.from_host(host, o.device), o.shape, o.dtype,
                                     o.device))
                else:
                    np.copyto(o, r)
        return out

    # -- interop -------------------------------------------------------------------------
    #: (node id, interface dict) of the node whose buffer the dict describes (see below)
    _face: tuple[int, dict] | None = None

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA Array Interface (v3) dict of the array's buffer (pending work run first).

        Built once per value and returned as is while the array holds that value: treat it
        as read-only. A node's buffer is set once (when its work runs) and never replaced,
        and everything that changes the array's buffer, shape, dtype or pending work (an
        image method, a Pipeline's write-back, ``out=``, a move to another device) binds it
        to another node, whose id the kept dict's does not match. The dict is the buffer's
        device array's own, so its ``stream`` is what numba-cuda reports (None for pool
        buffers: the Generator and Pipelines hand out values whose work has finished). A
        consumer such as ``torch.as_tensor`` reads the property twice per take: the first
        read builds the dict (~1.2 us on the 2-core dev machine, where numba-cuda's property
        alone costs 1.6), the second finds it (0.1; bench/probes/interface_cost.py).
        """
        got = self._face
        node = self._node
        if got is not None and got[0] == node.id:
            return got[1]
        return self._made_face(node)[1]

    def _made_face(self, node: Node) -> tuple[Any, dict]:
        """``node``'s buffer (its pending work run) and its interface dict, kept for ``node``."""
        if not ACTIVE.caps.external_memory:
            raise AttributeError(
                f"__cuda_array_interface__ needs a GPU backend (active: {ACTIVE.name})"
            )
        buf = node.buffer
        if buf is None:  # (a stored value, a Generator's output: no call to find it)
            buf = execute.materialize(node)
        face = ACTIVE.interface(buf)
        self._face = (node.id, face)
        return buf, face

    def __dlpack_device__(self) -> tuple[int, int]:
        if ACTIVE.caps.external_memory:
            return (2, self.device)  # kDLCUDA
        return (1, 0)  # kDLCPU

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """A DLPack capsule of the array (the array API's protocol).

        On a GPU backend the capsule is made here (``backend/dlpack.py``): the buffer's
        memory, no copy (``copy=True``: a fresh copy's), kept alive until the consumer lets
        it go, whatever happens to the array after; a DLPack 1.0 (versioned) capsule where
        ``max_version`` is 1 or more and NumPy is 2.1 or later (else a 0.8 one, as the
        standard allows). ``stream`` is the consumer's (None or 1 the legacy default stream,
        2 the per-thread one, -1 no ordering): it is made to wait, on the GPU, for the work
        this thread queued to compute the value. ``dl_device=(1, 0)`` gives a host copy. On
        the host backends: NumPy's capsule of the buffer itself (cpu; of a copy where
        ``copy=True``) or of a host copy (the simulator).
        """
        buf = self._materialize()
        if not ACTIVE.caps.external_memory:
            host = ACTIVE.to_host(buf) if ACTIVE.caps.device_memory else buf
            if copy and host is buf:  # (the cpu backend's buffer itself: a copy asked for)
                host = np.array(host, copy=True)
            return np.asarray(host).reshape(self.shape).__dlpack__()
        device = self.device
        if dl_device is not None and tuple(dl_device) != (dlpack.CUDA, device):
            if tuple(dl_device) != (dlpack.CPU, 0) or copy is False:
                raise BufferError(f"__dlpack__: dl_device {dl_device} needs a copy to another "
                                  f"device than this array's {(dlpack.CUDA, device)}"
                                  + (" (copy=False)" if copy is False else ""))
            return dlpack.host_capsule(np.asarray(self), max_version)
        x = self._new_like(apply("copy", self._node, (), self.shape, self.dtype, device=device),
                           self._sample) if copy else self  # (no sample index drawn)
        node = x._node
        got = x._face
        if got is not None and got[0] == node.id:
            buf, face = node.buffer, got[1]  # (kept: the node's work has run)
        else:
            buf, face = x._made_face(node)
        ACTIVE.hand_over(stream, device)
        shape, dtype = node.shape, node.dtype
        strides = face["strides"]  # (None: C-contiguous)
        if strides is not None:
            if tuple(face["shape"]) != shape or any(s % dtype.itemsize for s in strides):
                raise BufferError(f"__dlpack__: the buffer's strides {strides} are not whole "
                                  f"elements of shape {shape}")
            strides = tuple(s // dtype.itemsize for s in strides)
        versioned = max_version is not None and int(max_version[0]) >= 1
        return dlpack.capsule(face["data"][0], shape, strides, dtype, (dlpack.CUDA, device),
                              buf, versioned, dlpack.IS_COPIED if copy else 0)


def _binary(ufunc_name: str, reflected: bool = False):
    def op(self: gpuarray, other: Any) -> Any:
        uf = getattr(np, ufunc_name)
        return uf(other, self) if reflected else uf(self, other)

    op.__name__ = f"__{'r' if reflected else ''}{ufunc_name}__"
    return op


for _name, _uf in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "true_divide"), ("pow", "power"), ("floordiv", "floor_divide"),
                   ("mod", "remainder")):
    setattr(gpuarray, f"__{_name}__", _binary(_uf))
    setattr(gpuarray, f"__r{_name}__", _binary(_uf, reflected=True))
for _name, _uf in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                   ("ge", "greater_equal")):
    setattr(gpuarray, f"__{_name}__", _binary(_uf))
gpuarray.__neg__ = lambda self: np.negative(self)
gpuarray.__abs__ = lambda self: np.absolute(self)


# -- a Pipeline chunk's inputs, a chunk at a time (``pipeline.run``: one call a chunk, not
# one a member) -------------------------------------------------------------------------------
def values_of(xs: list[gpuarray]) -> list[Node | Member]:
    """Each array's :meth:`gpuarray._value`, read without :data:`member.LOCK` where it can be:
    ``_node``, else ``_member`` (a read converting the member sets ``_node`` before it drops
    ``_member``, so only a conversion between the two lookups finds neither, and that input
    alone takes ``_value``'s lock). (One comprehension: a value, node or member, is never
    false.)"""
    return [(d := x.__dict__).get("_node") or d.get("_member") or x._value() for x in xs]


def still_holds(xs: list[gpuarray], values: list[Node | Member]) -> bool:
    """Whether every array still holds the very value read (:func:`values_of`), unread where
    it was a member (a member read since counts as changed here: the caller regroups it
    the per-input way, as for any value changed)."""
    for x, value in zip(xs, values, strict=True):
        d = x.__dict__
        if (d.get("_member") if type(value) is Member else d.get("_node")) is not value:
            return False
    return True


def bind_members(xs: list[gpuarray], nodes: list[Node | Member], values: list[Member | None],
                 bound: list[int], changed: list[int], busy: list[int]) -> None:
    """Bind ``xs[r]`` to ``values[r]`` (a chunk's outputs; None: not this chunk's) where it
    still holds ``nodes[r]`` (:meth:`gpuarray._holds`), under its commit lock, only tried:
    rows bound go to ``bound``, rows without a value or whose value changed to ``changed``
    (the caller processes them per input), rows whose lock
    another thread holds to ``busy`` (the caller waits for those without its own locks). The
    lists are filled as it goes: whatever stops it, ``bound`` says what was bound.

    :meth:`gpuarray._holds` and :meth:`gpuarray._bind_member` written out, under
    :data:`member.LOCK` taken once for the chunk (a read converting a member meanwhile waits
    for the chunk's binds, not one bind's); each input's commit lock is only tried under it,
    never waited for, and one is held at a time (``locks.py``). An input with no commit lock
    (a fresh one, or one only Pipelines updated) is bound with none: locks are made under
    :data:`member.LOCK`, so none can be made, taken or held meanwhile (``locks.py``)."""
    with member.LOCK:
        for r, value in enumerate(values):
            if value is None:
                changed.append(r)
                continue
            x = xs[r]
            d = x.__dict__
            held = d.get("_commit_lock")
            if held is not None and not held.acquire(False):
                busy.append(r)
                continue
            try:
                node = nodes[r]
                # (``_member`` set before ``_node`` goes: a lockless read finds either)
                if type(node) is not Member:
                    if d.get("_node") is node:
                        d["_member"] = value
                        del d["_node"]  # (no bind or read moves it meanwhile: held locks)
                        node.users -= 1
                        bound.append(r)
                    else:
                        changed.append(r)
                elif d.get("_member") is node or (node.made is not None and
                                                  d.get("_node") is node.made):
                    d["_member"] = value
                    old = d.pop("_node", None)
                    if old is not None:
                        old.users -= 1
                    bound.append(r)
                else:
                    changed.append(r)
            finally:
                if held is not None:
                    held.release()
