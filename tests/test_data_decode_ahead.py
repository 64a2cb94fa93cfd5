"""Decoders made ahead: the registry (decode_ahead) and make_decoder taking what it made."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from millipyde.data import decode as dmod
from millipyde.data import decode_ahead


def _ahead_threads() -> list[threading.Thread]:
    """The registry's threads still running after a second's grace (each ends once its
    thing is made)."""
    for t in threading.enumerate():
        if t.name == "millipyde-made-ahead":
            t.join(1.0)
    return [t for t in threading.enumerate() if t.name == "millipyde-made-ahead"]


@pytest.fixture(autouse=True)
def _clean():
    decode_ahead._AHEAD.clear()
    yield
    decode_ahead._AHEAD.clear()


def test_made_once_waited_for_and_taken_once():
    gate, made = threading.Event(), []

    def make():
        gate.wait(5)  # still being made when taken: take waits for it
        made.append(1)
        return "thing"

    assert decode_ahead.start("k", make)
    assert not decode_ahead.start("k", make)  # one already under this key
    threading.Timer(0.05, gate.set).start()
    assert decode_ahead.take("k") == "thing" and made == [1]
    assert decode_ahead.take("k") is None  # taken
    assert decode_ahead.take("other") is None  # never started
    assert not _ahead_threads()


def test_a_failure_is_nothing_to_take():
    def fail():
        raise RuntimeError("cannot")

    decode_ahead.start("k", fail)
    assert decode_ahead.take("k") is None


class _Dec:
    """A decoder as the loader uses it: decode(datas, name_of) -> arrays."""

    def __init__(self, tag: str) -> None:
        self.tag, self.calls = tag, 0

    def decode(self, datas, name_of, stream=None):
        self.calls += 1
        return [np.zeros((32, 48, 3), np.uint8) for _ in datas]


def test_make_decoder_takes_the_warmed_decoder_made_ahead(monkeypatch):
    from millipyde.backend import ACTIVE as runtime

    monkeypatch.setattr(runtime, "caps", dataclasses.replace(runtime.caps, nvidia_codecs=True))
    built = []

    def build(choice, device, threads):
        built.append((choice, device, threads))
        return _Dec(f"built {len(built)}")

    monkeypatch.setattr(dmod, "_build_decoder", build)
    dmod.prepare_decoder(0, 3)
    dmod.prepare_decoder(0, 3)  # already being made: nothing more
    got = dmod.make_decoder("auto", 0, 3)
    assert got.tag == "built 1" and got.calls == 1  # warmed by one decode
    assert built == [("nvimgcodec", 0, 3)]
    # taken once; other threads, devices or interfaces are not it
    assert dmod.make_decoder("auto", 0, 3).tag == "built 2"
    dmod.prepare_decoder(1, 3)
    assert dmod.make_decoder("auto", 0, 3).tag == "built 4"
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", "python" if dmod.nvimgcodec_api() == "c"
                        else "c")
    assert dmod.make_decoder("auto", 1, 3).tag == "built 5"
    # pillow asked for: never the GPU decoder made ahead
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", None)
    assert dmod.make_decoder("pillow", 1, 3).tag == "built 6"
    assert not _ahead_threads()


def test_on_a_backend_without_nvidia_codecs_nothing_is_kept():
    from millipyde.backend import ACTIVE as runtime

    if runtime.caps.nvidia_codecs:
        pytest.skip("this backend has NVIDIA codecs (the GPU runs check the real decoder)")
    dmod.prepare_decoder(0, 1)
    key = dmod._ahead_key(0, 1)
    assert decode_ahead.take(key) is None  # building it raised: nothing kept
    assert isinstance(dmod.make_decoder("auto", 0, 1), dmod.PillowDecoder)
