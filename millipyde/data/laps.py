"""Where a decode lane's call spends its time: the wall and thread-CPU seconds of each of its
segments (taking the samples, parsing, drawing region boxes, the allocation, the compiled
decode, the views, ...), and the waits to take the GIL back after each GIL-free pass.

A :class:`Laps` is made per batch by a Loader whose ``loader.SEGMENTS`` is on and handed to
its decoder; the segments are summed into the Loader's stats (``seg_<name>_s`` wall,
``seg_<name>_cpu_s`` the lane thread's CPU). In a segment that holds the GIL the wall time
beyond the CPU time is mostly time spent waiting for the GIL (other threads running Python:
the readers, the batch worker, the consumer); in a GIL-free pass it is the library's waits
too, so the pass's end is stamped inside it (``capi_loop._stamp``) and the wait from that
stamp to the thread running Python again is counted apart (``regain``).
"""

from __future__ import annotations

import time

_wall = time.perf_counter
_cpu = time.thread_time


class Laps:
    """Segments of one lane call, timed one after the other (:meth:`lap` ends one).

    Attributes
    ----------
    wall : dict of str to float
        Wall seconds per segment.
    cpu : dict of str to float
        The calling thread's CPU seconds per segment.
    regains : int
        GIL-free compiled passes whose return was timed (:meth:`regain`).
    regain_s : float
        Seconds from those passes' ends to their thread running Python again.
    """

    __slots__ = ("wall", "cpu", "parts", "regains", "regain_s", "_w", "_c")

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        #: wall seconds of the stages inside a segment (``"decode.wait"``), stamped by the
        #: compiled pass itself
        self.parts: dict[str, float] = {}
        self.regains = 0
        self.regain_s = 0.0
        self._w = _wall()
        self._c = _cpu()

    def lap(self, name: str) -> None:
        """End segment ``name`` here (it began at the last lap, or at the Laps' making)."""
        w, c = _wall(), _cpu()
        self.wall[name] = self.wall.get(name, 0.0) + (w - self._w)
        self.cpu[name] = self.cpu.get(name, 0.0) + (c - self._c)
        self._w, self._c = w, c

    def part(self, name: str, ns: int) -> None:
        """Add ``ns`` nanoseconds to the stage ``name`` of a segment."""
        self.parts[name] = self.parts.get(name, 0.0) + ns * 1e-9

    def regain(self, ns: int) -> None:
        """Count a GIL-free pass whose thread waited ``ns`` nanoseconds to run Python after
        it (negative: not known, not counted)."""
        if ns >= 0:
            self.regains += 1
            self.regain_s += ns * 1e-9

    def into(self, stats: dict) -> None:
        """Add these segments to a Loader's ``stats`` (``seg_<name>_s``,
        ``seg_<name>_cpu_s``, ``part_<segment.stage>_s``, ``seg_regains``,
        ``seg_regain_s``)."""
        for name, w in self.wall.items():
            key = f"seg_{name}_s"
            stats[key] = stats.get(key, 0.0) + w
            key = f"seg_{name}_cpu_s"
            stats[key] = stats.get(key, 0.0) + self.cpu[name]
        for name, w in self.parts.items():
            key = f"part_{name}_s"
            stats[key] = stats.get(key, 0.0) + w
        stats["seg_regains"] = stats.get("seg_regains", 0) + self.regains
        stats["seg_regain_s"] = stats.get("seg_regain_s", 0.0) + self.regain_s


def table(stats: dict, batches: int) -> str:
    """``stats``' segments (:meth:`Laps.into`) as lines of milliseconds a batch: wall, the
    thread's CPU, and the wall beyond the CPU; then the GIL regains after GIL-free passes.
    Empty where there are none."""
    names = [k[4:-2] for k in stats if k.startswith("seg_") and k.endswith("_s")
             and not k.endswith("_cpu_s") and k != "seg_regain_s"]
    if not names or batches <= 0:
        return ""
    per = 1000.0 / batches
    lines = [f"    {'segment':<12} {'wall ms':>8} {'cpu ms':>8} {'wall-cpu':>8}  (a batch, "
             f"{batches} batches)"]
    total_w = total_c = 0.0
    for n in names:
        w, c = stats[f"seg_{n}_s"] * per, stats.get(f"seg_{n}_cpu_s", 0.0) * per
        total_w, total_c = total_w + w, total_c + c
        lines.append(f"    {n:<12} {w:8.3f} {c:8.3f} {w - c:8.3f}")
        for k in stats:
            if k.startswith(f"part_{n}.") and k.endswith("_s"):
                lines.append(f"      .{k[len(n) + 6:-2]:<9} {stats[k] * per:8.3f}")
    lines.append(f"    {'all':<12} {total_w:8.3f} {total_c:8.3f} {total_w - total_c:8.3f}")
    k = stats.get("seg_regains", 0)
    if k:
        lines.append(f"    GIL taken back after {k / batches:.1f} GIL-free passes a batch: "
                     f"{stats['seg_regain_s'] * per:.3f} ms a batch waited "
                     f"({1e6 * stats['seg_regain_s'] / k:.0f} us a pass)")
    return "\n".join(lines)
