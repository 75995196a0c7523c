"""The library's errors: each message names the problem and the fix.

``ConfigError`` (input that cannot work, raised before anything compiles) is a ``ValueError``,
so the facade's documented ``ValueError`` contract holds for it too. The checkpoint errors are
``unilab_jax.training.checkpoint``'s.
"""

from pathlib import Path

__all__ = [
    "CheckpointDamagedError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "ConfigError",
    "EnvNaNError",
    "LearnerDivergedError",
]


class ConfigError(ValueError):
    """A training configuration that cannot work; the message names the problem and the fix."""


class EnvNaNError(FloatingPointError):
    """An environment produced a non-finite observation or reward (training stops)."""


class LearnerDivergedError(FloatingPointError):
    """The learner's losses or parameters became non-finite (training stops; nothing after the
    last finite block is saved)."""


class CheckpointError(Exception):
    """A checkpoint that cannot be written or restored; the message says which and why
    (the three below and ``unilab_jax.training.resume.ResumeError`` derive from it)."""


class CheckpointSaveError(CheckpointError):
    """Writing a checkpoint failed (disk full, read-only file system, ...)."""


class CheckpointDamagedError(CheckpointError):
    """A checkpoint whose files are corrupt, truncated or missing."""

    def __init__(self, directory: Path, step: int, reason: str) -> None:
        self.directory, self.step, self.reason = directory, step, reason
        super().__init__(f"checkpoint {step} under {directory} is damaged: {reason}")


class CheckpointMismatchError(CheckpointError):
    """A checkpoint written for a state of other shapes (other settings)."""

    def __init__(self, step: int, meta: dict, differences: list[str]) -> None:
        self.step, self.meta, self.differences = step, meta, differences
        shown = "; ".join(differences[:4]) + ("; ..." if len(differences) > 4 else "")
        count = f"{len(differences)} array(s) differ"
        super().__init__(f"checkpoint {step} holds a state of other shapes ({count}: {shown})")
