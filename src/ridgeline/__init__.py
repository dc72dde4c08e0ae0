"""ridgeline: what an LLM token costs, from the roofline up."""

from ridgeline.errors import RidgelineError
from ridgeline.estimate import Estimate, build_machine, estimate
from ridgeline.hardware import Accelerator, get_accelerator
from ridgeline.models import get_model

__all__ = [
    "Accelerator",
    "Estimate",
    "RidgelineError",
    "build_machine",
    "estimate",
    "get_accelerator",
    "get_model",
]
__version__ = "0.1.0"
