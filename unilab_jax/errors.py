"""Errors for input that cannot work, raised before anything compiles.

Each message names the setting, the value and the fix. ``ConfigError`` is a ``ValueError``,
so the facade's documented ``ValueError`` contract holds for it too.
"""

__all__ = ["CheckpointError", "ConfigError", "EnvNaNError", "LearnerDivergedError"]


class ConfigError(ValueError):
    """A training configuration that cannot work; the message names the problem and the fix."""


class EnvNaNError(FloatingPointError):
    """An environment produced a non-finite observation or reward (training stops)."""


class LearnerDivergedError(FloatingPointError):
    """The learner's losses or parameters became non-finite (training stops; nothing after the
    last finite block is saved)."""


class CheckpointError(Exception):
    """A checkpoint that cannot be written or restored; the message says which and why
    (``unilab_jax.training.checkpoint``'s errors and ``unilab_jax.training.resume.ResumeError``
    derive from it)."""
