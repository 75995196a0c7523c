"""`EmpiricalNormalization`: running observation statistics, identical to the JAX normaliser.

`forward(x) = (x - mean) / (std + eps)` with `std = sqrt(var)` and `eps = 1e-2`; `update(x)`
merges a batch with Chan et al.'s parallel formula in float32, exactly as
`unilab_jax.algos.normalizer.update_normalizer` does (same operation order), so torch and JAX
statistics agree to float32 rounding of the batch sums (`tests/torch/test_parity_maths.py`)
and convert exactly.

Buffers keep the reference's names and shapes (`_mean`, `_var`, `_std` as `[1, D]`, `count`),
so reference checkpoints load.

Deviations from the reference:
- `forward` never updates the statistics (the reference updated them in training mode on every
  call, i.e. on replay-sampled observations inside `update_critic`). The learner's
  `update_normalizers(obs, critic)` feeds freshly collected observations instead, as the JAX loop
  does.
- `count` is a float32 buffer (the reference used int64) because the JAX state holds it in
  float32 and the merge weights `n_b / (n_a + n_b)` must round the same way.
- No `until` cut-off (the JAX normaliser never freezes).
- The merge is Chan et al.'s exactly. The reference's Welford step weighted the correction term
  with the distance of the batch mean to the *merged* mean, `(batch_mean - new_mean)^2 * n_a n_b
  / n`, instead of to the old one, which scales the correction by `(n_a / n)^2` (a quarter when
  batch and history are the same size) and underestimates the variance while the mean moves;
  checked against its recorded update in `tests/test_reference_learners.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from unilab.algos.torch.common.batch import CRITIC_BATCH_KEYS, require_batch_keys
from unilab.algos.torch.common.networks import bootstrap_mask
from unilab_jax.algos.normalizer import NORMALIZER_EPS

__all__ = ["EmpiricalNormalization", "ObsNormalizingLearner"]


class EmpiricalNormalization(nn.Module):
    """Normalise `[..., D]` inputs by running mean and standard deviation."""

    def __init__(
        self,
        shape: int | tuple[int, ...],
        device: torch.device | str | None = None,
        eps: float = NORMALIZER_EPS,
    ) -> None:
        super().__init__()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        # Prior mean 0, var 1 with count 0: the first update replaces it exactly.
        self.register_buffer("_mean", torch.zeros(1, *shape, device=device))
        self.register_buffer("_var", torch.ones(1, *shape, device=device))
        self.register_buffer("_std", torch.ones(1, *shape, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float32, device=device))

    @property
    def mean(self) -> torch.Tensor:
        """Running mean `[D]`."""
        return self._mean.squeeze(0).clone()

    @property
    def std(self) -> torch.Tensor:
        """Running standard deviation `[D]` (population)."""
        return self._std.squeeze(0).clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`(x - mean) / (std + eps)`; pure (see the module docstring)."""
        return (x - self._mean) / (self._std + self.eps)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the rows of `x` `[M, D]` into the statistics (Chan's parallel update)."""
        x = x.to(torch.float32).reshape(-1, *self._mean.shape[1:])
        batch_count = torch.tensor(float(x.shape[0]), dtype=torch.float32, device=x.device)
        batch_mean = torch.mean(x, dim=0, keepdim=True)
        batch_var = torch.mean(torch.square(x - batch_mean), dim=0, keepdim=True)

        count = self.count
        total = count + batch_count
        delta = batch_mean - self._mean
        mean = self._mean + delta * (batch_count / total)
        m2 = self._var * count + batch_var * batch_count
        m2 = m2 + torch.square(delta) * (count * batch_count / total)
        self._mean.copy_(mean)
        self._var.copy_(m2 / total)
        # torch's float32 CPU sqrt is not correctly rounded (it can differ from XLA's in the
        # last bit); the float64 root rounded to float32 is, so `_std` equals JAX's sqrt(var).
        self._std.copy_(torch.sqrt(self._var.to(torch.float64)).to(torch.float32))
        self.count.copy_(total)


class ObsNormalizingLearner:
    """What FastSAC and FastTD3 share about observations: the two normalisers' statistics are
    fed explicitly (fresh env observations, as the JAX loop does), and every update sees a
    batch normalised with them plus the bootstrap mask.

    Subclasses set ``obs_normalizer`` and ``critic_normalizer`` (``EmpiricalNormalization``, or
    ``nn.Identity`` without ``obs_normalization``).
    """

    obs_normalizer: nn.Module
    critic_normalizer: nn.Module

    def update_normalizers(self, obs: torch.Tensor, critic: torch.Tensor | None = None) -> None:
        """Merge freshly collected `obs [M, obs_dim]` / `critic [M, critic_dim]` into the stats.

        A no-op without `obs_normalization`. `critic` falls back to `obs`.
        """
        if isinstance(self.obs_normalizer, EmpiricalNormalization):
            self.obs_normalizer.update(obs)
            self.critic_normalizer.update(obs if critic is None else critic)

    def normalize_obs(self, obs: torch.Tensor, update: bool = False) -> torch.Tensor:
        """Actor inputs `obs [M, obs_dim]` normalised with the running statistics (the
        reference's method); `update=True` first merges `obs` into the actor-input statistics
        (only those: `update_normalizers` feeds both). Without `obs_normalization`, `obs`."""
        if not isinstance(self.obs_normalizer, EmpiricalNormalization):
            return obs
        if update:
            self.obs_normalizer.update(obs)
        with torch.no_grad():
            return self.obs_normalizer(obs)

    def _normalized(
        self, batch: Mapping[str, torch.Tensor], keys: tuple[str, ...] = CRITIC_BATCH_KEYS
    ) -> dict[str, torch.Tensor]:
        """The entries ``keys`` of ``batch`` as the losses read them: observations normalised,
        rewards ``[B]`` float32 and, from ``dones`` / ``truncated``, the ``bootstrap`` mask.
        A missing key raises ``MissingBatchKeyError`` (``common.batch``)."""
        require_batch_keys(batch, keys, type(self).__name__)
        normalizers = {
            "obs": self.obs_normalizer,
            "next_obs": self.obs_normalizer,
            "critic": self.critic_normalizer,
            "next_critic": self.critic_normalizer,
        }
        out: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for key in keys:
                if key in normalizers:
                    out[key] = normalizers[key](batch[key])
                elif key == "rewards":
                    out[key] = batch[key].reshape(-1).to(torch.float32)
                elif key not in ("dones", "truncated"):
                    out[key] = batch[key]
            if "dones" in keys:
                dones = batch["dones"].reshape(-1)
                out["bootstrap"] = bootstrap_mask(dones, batch["truncated"].reshape(-1))
        return out
