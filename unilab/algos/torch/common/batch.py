"""The learners' batch contract: which keys an update reads, and the error when one is missing.

A replay batch is a dict of tensors (``ReplayBuffer.sample``): ``obs [B, obs_dim]``,
``critic [B, critic_obs_dim]``, ``actions [B, A]``, ``rewards [B]``, ``next_obs``,
``next_critic``, ``dones [B]`` (episode ended, time-outs included) and ``truncated [B]`` (it
ended by a time-out). A critic update reads all eight; an actor update the keys its loss reads
(``ACTOR_BATCH_KEYS``; FlashSAC's actor also runs on ``next_obs``).

A missing key raises ``MissingBatchKeyError`` (a ``KeyError`` whose ``args`` are the key alone,
as indexing the reference's batch did) before anything is computed. There is no fallback: a
batch without ``truncated`` would count every time-out as a termination, and one without
``critic`` / ``next_critic`` would train the critic on actor observations, both silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = [
    "ACTOR_BATCH_KEYS",
    "CRITIC_BATCH_KEYS",
    "MissingBatchKeyError",
    "require_batch_keys",
]

#: The keys every critic update reads, in the reference's order.
CRITIC_BATCH_KEYS = (
    "obs",
    "critic",
    "actions",
    "rewards",
    "next_obs",
    "next_critic",
    "dones",
    "truncated",
)
#: The keys FastSAC's and FastTD3's actor updates read.
ACTOR_BATCH_KEYS = ("obs", "critic")


class MissingBatchKeyError(KeyError):
    """A batch without a key its update reads; ``args == (key,)``."""

    def __init__(self, key: str, needed: tuple[str, ...], owner: str) -> None:
        super().__init__(key)
        self.key = key
        self.needed = needed
        self.owner = owner

    def __str__(self) -> str:
        return (
            f"{self.owner}: the batch has no {self.key!r}; this update reads "
            f"{', '.join(self.needed)} (ReplayBuffer.sample's keys)"
        )


def require_batch_keys(batch: Mapping[str, object], keys: Iterable[str], owner: str) -> None:
    """Raise ``MissingBatchKeyError`` for the first of ``keys`` that ``batch`` lacks."""
    needed = tuple(keys)
    for key in needed:
        if key not in batch:
            raise MissingBatchKeyError(key, needed, owner)
