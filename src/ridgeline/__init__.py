"""ridgeline: what an LLM token costs, from the roofline up.

The public API, loaded on first use so that `import ridgeline.cli` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
_EXPORTS = {
    "Accelerator": "ridgeline.hardware",
    "Estimate": "ridgeline.estimate",
    "RidgelineError": "ridgeline.errors",
    "build_machine": "ridgeline.estimate",
    "estimate": "ridgeline.estimate",
    "get_accelerator": "ridgeline.hardware",
    "get_model": "ridgeline.models",
}
__all__ = [
    "Accelerator",
    "Estimate",
    "RidgelineError",
    "build_machine",
    "estimate",
    "get_accelerator",
    "get_model",
]

if TYPE_CHECKING:
    from ridgeline.errors import RidgelineError
    from ridgeline.estimate import Estimate, build_machine, estimate
    from ridgeline.hardware import Accelerator, get_accelerator
    from ridgeline.models import get_model


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'ridgeline' has no attribute {name!r}")
