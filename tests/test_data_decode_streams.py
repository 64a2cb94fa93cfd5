"""Decode streams outlive what is decoded on them (``Backend.take_stream``).

nvImageCodec frees a decoded image on the stream it was decoded on, whenever the image goes. A
garbage collection of a cycle holding decoded images and their numba-cuda stream ran the
stream's ``weakref.finalize`` first (destroying it), then freed the images on the dead handle:
segmentation faults in whichever thread collected (tests/test_data_generator.py's bad-file
tests crashed that way in 1-4 runs of 10 on an H200).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime

# the decoded images in a cycle with their stream, collected with numba-cuda's deferred frees
# flushed at each one (so a finalized stream is destroyed at once, inside the collection)
_CYCLE = """
import gc
import io
import sys

import numpy as np
from numba.cuda.core import config
from PIL import Image
from skimage import data

from millipyde.backend import ACTIVE as runtime
from millipyde.data.decode import make_decoder

out = io.BytesIO()
Image.fromarray(data.astronaut()).save(out, "JPEG", quality=90)
jpeg = out.getvalue()
decoder = make_decoder("nvimgcodec", 0)
config.CUDA_DEALLOCS_COUNT = 0
kept = sys.argv[1] == "take_stream"
for _ in range(10):
    stream = runtime.take_stream(0) if kept else runtime.new_stream(0)
    with runtime.on_device(0):
        images = decoder.decode([jpeg] * 8, lambda r: f"sample {r}", stream)
    assert all(type(a).__name__ == "DeviceImage" for a in images), images
    runtime.synchronize(0)
    holder = [images, stream]
    holder.append(holder)
    if kept:
        runtime.give_stream(stream)
    del images, stream, holder
    gc.collect()
runtime.synchronize(0)
print("collected")
"""


@pytest.mark.cudasim_ok
def test_kept_streams_are_reused_and_checked() -> None:
    a = runtime.take_stream(0)
    if not runtime.caps.launches_on_streams:
        assert a is None
        return
    runtime.give_stream(a)
    b = runtime.take_stream(0)
    assert b is a  # handed back, taken again: never destroyed, never a second one
    c = runtime.take_stream(0)
    assert c is not b
    runtime.give_stream(b)
    runtime.give_stream(c)
    with pytest.raises(ValueError, match="take_stream"):
        runtime.give_stream(runtime.new_stream(0))


@pytest.mark.skipif(mp.backend() != "cuda" or not runtime.caps.nvidia_codecs,
                    reason="nvImageCodec decodes on an NVIDIA GPU")
@pytest.mark.parametrize("api", ["python", "c"])
def test_decoded_images_collected_in_a_cycle_with_their_stream(api) -> None:
    """The binding's images (freed by nvImageCodec on their stream) and the C API's (views
    of one backend allocation a batch) in a cycle with their stream, collected."""
    pytest.importorskip("nvidia.nvimgcodec")
    env = dict(os.environ, MILLIPYDE_BACKEND="cuda", MILLIPYDE_NVIMGCODEC_API=api)
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(_CYCLE),
                           "take_stream"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "collected" in proc.stdout, \
        f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
