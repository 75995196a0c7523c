"""What every part of the exporter shares: the format names, the packages each needs, the
check's tolerance and the ``ExportError`` family.

``missing_dependencies`` (and ``require``, which raises ``ExportDependencyError`` naming the
extra to install) checks for the optional packages without importing them, so the JAX core
stays free of torch until a file is written. ``unilab_jax.policy.export`` describes the formats.
"""

from __future__ import annotations

import importlib.util

__all__ = [
    "EXPORT_EXTRA",
    "FORMATS",
    "TOLERANCE",
    "ExportDependencyError",
    "ExportError",
    "ExportVerificationError",
    "missing_dependencies",
]

FORMATS = ("torch", "torchscript", "onnx")
"""The export formats, as ``--format`` names them."""

EXPORT_EXTRA = (
    "pip install 'unilab-jax[export]' "
    "(torch==2.13.0 onnx==1.23.2 onnxruntime==1.31.1 onnxscript==0.7.2)"
)
"""The install line for the optional packages the exporter needs."""

TOLERANCE = 1e-5
"""Largest accepted ``|exported - JAX policy|`` on any action entry (float32 round-off)."""

# What each format needs besides the JAX core (the dynamo ONNX exporter needs onnxscript; onnx
# writes the metadata, onnxruntime runs the check).
_REQUIRED = {
    "torch": ("torch",),
    "torchscript": ("torch",),
    "onnx": ("torch", "onnx", "onnxscript", "onnxruntime"),
}


class ExportError(Exception):
    """An export that cannot be made (a policy of an unsupported shape, a bad format)."""


class ExportDependencyError(ExportError, ImportError):
    """A package the requested format needs is not installed (the message names the extra)."""


class ExportVerificationError(ExportError):
    """The exported file does not compute the JAX policy's actions within ``TOLERANCE``."""


def missing_dependencies(fmt: str) -> list[str]:
    """The packages ``fmt`` needs that are not importable here (checked without importing)."""
    return [name for name in _REQUIRED[check_format(fmt)] if importlib.util.find_spec(name) is None]


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def require(fmt: str) -> None:
    missing = missing_dependencies(fmt)
    if missing:
        raise ExportDependencyError(
            f"--format {fmt} needs {', '.join(missing)}, not installed: {EXPORT_EXTRA}"
        )
