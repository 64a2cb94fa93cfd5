"""``from millipyde.transforms import v2`` (as ``from torchvision.transforms import v2``)."""

from . import *  # noqa: F403
from . import NOT_SUPPORTED, __all__  # noqa: F401
from .unsupported import *  # noqa: F403
