"""decode_ahead: nvImageCodec's decoder made in a thread of its own, taken once by a loader."""

from __future__ import annotations

import threading

import pytest

from millipyde.data import decode_ahead
from millipyde.data.decode import NvImageCodecDecoder, PillowDecoder


class _Nv:
    """The parts of nvImageCodec's module a decoder's constructor reads."""

    class ColorSpec:
        SRGB = 1

    class DecodeParams:
        def __init__(self, **kw) -> None:
            self.kw = kw

    class Decoder:
        def __init__(self, device_id: int, max_num_cpu_threads: int = 0) -> None:
            self.device_id = device_id


def _ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "millipyde-decoder-ahead"]


@pytest.fixture(autouse=True)
def _clean():
    decode_ahead._AHEAD.clear()
    yield
    decode_ahead._AHEAD.clear()


def test_made_once_and_taken_once_by_the_loader(monkeypatch):
    made, gate = [], threading.Event()

    def make(device, threads):
        gate.wait(5)  # still being made when the loader asks: it waits for it
        made.append((device, threads))
        return ("made ahead", device, threads)

    monkeypatch.setattr(decode_ahead, "_make", make)
    decode_ahead.prepare_decoder(0, 3)
    decode_ahead.prepare_decoder(0, 3)  # one already pending: nothing more
    threading.Timer(0.05, gate.set).start()
    dec = NvImageCodecDecoder(0, PillowDecoder(0, threads=3), module=_Nv)
    assert dec._dec == ("made ahead", 0, 3) and made == [(0, 3)]
    # taken: the next loader makes its own
    again = NvImageCodecDecoder(0, PillowDecoder(0, threads=3), module=_Nv)
    assert isinstance(again._dec, _Nv.Decoder)
    assert not _ahead_threads()


def test_other_threads_or_device_not_taken(monkeypatch):
    monkeypatch.setattr(decode_ahead, "_make", lambda d, t: ("made ahead", d, t))
    decode_ahead.prepare_decoder(1, 2)
    dec = NvImageCodecDecoder(0, PillowDecoder(0, threads=2), module=_Nv)
    assert isinstance(dec._dec, _Nv.Decoder)
    assert decode_ahead.take_decoder(1, 2) == ("made ahead", 1, 2)


def test_a_failure_ahead_leaves_the_loader_its_own(monkeypatch):
    def fail(device, threads):
        raise RuntimeError("no decoder for you")

    monkeypatch.setattr(decode_ahead, "_make", fail)
    decode_ahead.prepare_decoder(0, 1)
    dec = NvImageCodecDecoder(0, PillowDecoder(0, threads=1), module=_Nv)
    assert isinstance(dec._dec, _Nv.Decoder)


def test_without_nvidia_codecs_nothing_is_made():
    from millipyde.backend import ACTIVE as runtime

    if runtime.caps.nvidia_codecs:
        pytest.skip("this backend has NVIDIA codecs (the GPU runs check the real decoder)")
    decode_ahead.prepare_decoder(0, 1)
    assert decode_ahead.take_decoder(0, 1) is None
    assert decode_ahead.take_decoder(0, 1) is None  # taken: nothing left
    assert not _ahead_threads()
