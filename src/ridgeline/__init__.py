"""ridgeline: what an LLM token costs, from the roofline up.

The public API loads on first use, so `import ridgeline` costs almost nothing and pulls
in none of the faces' libraries."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ridgeline.deployment import Deployment  # noqa: F401
    from ridgeline.errors import RidgelineError  # noqa: F401
    from ridgeline.hardware import Accelerator, get_accelerator  # noqa: F401
    from ridgeline.models import get_model  # noqa: F401
    from ridgeline.predict import Estimate, estimate, estimate_on  # noqa: F401

_PUBLIC = {
    "Accelerator": "ridgeline.hardware",
    "Estimate": "ridgeline.predict",
    "RidgelineError": "ridgeline.errors",
    "Deployment": "ridgeline.deployment",
    "estimate_on": "ridgeline.predict",
    "estimate": "ridgeline.predict",
    "get_accelerator": "ridgeline.hardware",
    "get_model": "ridgeline.models",
}
__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ridgeline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
