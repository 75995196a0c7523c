"""FlashSAC's torch actor, in the JAX actor's layout (``unilab_jax.algos.flash_networks``).

``FlashSACActor``: ``BatchNorm1d -> Linear(d, no bias) -> num_blocks x inverted residual
[x + ReLU(BN(Linear(4d -> d)(ReLU(BN(Linear(d -> 4d)(x))))))] -> RMSNorm -> mu / log_std``
heads (with biases), ``log_std`` squashed into ``[log_std_min, log_std_max]``; deterministic
action ``tanh(mean)``. Every BatchNorm takes an explicit ``train`` flag (batch statistics, and
the running ones updated, as torch's rule: ``(1 - m) * running + m * batch``, unbiased
variance) instead of the module's mode, so inference never depends on ``.train()``/``.eval()``.
Exploration holds each env's standard normal draw for a Zeta-distributed number of steps, as
the JAX core does, and draws uniform random actions until the learner's first actor step (the
``updates`` buffer, published with the weights). This module imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from unilab_jax.algos.hyperparams import FlashSACConfig
from unilab_jax.torch.weights import JaxPath, Row

__all__ = ["FlagBatchNorm", "FlashBlock", "FlashSACActor", "FlashTrunk", "flash_trunk_rows"]

_FLASH = FlashSACConfig()


def flash_trunk_rows(
    torch_prefix: str, params: JaxPath, stats: JaxPath, num_blocks: int, member: int = 0
) -> list[Row]:
    """A ``FlashTrunk``'s tensors <-> the JAX trunk's parameters under ``params`` and BatchNorm
    statistics under ``stats`` (member ``member`` of the batched leaves)."""

    def bn(torch_name: str, jax_name: str) -> list[Row]:
        t, m = f"{torch_prefix}.{torch_name}", (member,)
        return [
            Row(f"{t}.weight", (*params, jax_name, "scale", *m), "copy"),
            Row(f"{t}.bias", (*params, jax_name, "bias", *m), "copy"),
            Row(f"{t}.running_mean", (*stats, jax_name, "mean", *m), "copy"),
            Row(f"{t}.running_var", (*stats, jax_name, "var", *m), "copy"),
        ]

    def weight(torch_name: str, jax_name: str) -> Row:
        return Row(f"{torch_prefix}.{torch_name}.weight", (*params, jax_name, "kernel", member),
                   "transpose")  # fmt: skip

    rows = bn("bn_in", "bn_in") + [weight("embed", "embed")]
    for i in range(num_blocks):
        rows += [weight(f"blocks.{i}.up", f"block_{i}_up")] + bn(
            f"blocks.{i}.bn_up", f"block_{i}_bn_up"
        )
        rows += [weight(f"blocks.{i}.down", f"block_{i}_down")]
        rows += bn(f"blocks.{i}.bn_down", f"block_{i}_bn_down")
    return rows + [Row(f"{torch_prefix}.rms.weight", (*params, "rms", "scale", member), "copy")]


class FlagBatchNorm(nn.BatchNorm1d):
    """``BatchNorm1d`` (eps 1e-5) that takes the mode as an argument: ``train`` normalises with
    the batch and updates the running statistics, else the running statistics are used."""

    def __init__(self, features: int, momentum: float, device: Any = None) -> None:
        super().__init__(features, eps=1e-5, momentum=momentum, device=device)
        self.rate = float(momentum)  # a float for TorchScript (BatchNorm's is Optional)

    def forward(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, train, self.rate,
            self.eps,
        )  # fmt: skip


class FlashBlock(nn.Module):
    """One inverted-residual block: `x + ReLU(BN(down(ReLU(BN(up(x))))))`."""

    def __init__(self, width: int, momentum: float, device: Any = None) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width, bias=False, device=device)
        self.bn_up = FlagBatchNorm(4 * width, momentum, device)
        self.down = nn.Linear(4 * width, width, bias=False, device=device)
        self.bn_down = FlagBatchNorm(width, momentum, device)

    def forward(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        h = torch.relu(self.bn_up(self.up(x), train))
        return x + torch.relu(self.bn_down(self.down(h), train))


class FlashTrunk(nn.Module):
    """`[N, in] -> [N, width]`: input BatchNorm, embedding, blocks, RMSNorm."""

    def __init__(
        self, in_dim: int, width: int, num_blocks: int, momentum: float, device: Any = None
    ) -> None:
        super().__init__()
        self.bn_in = FlagBatchNorm(in_dim, momentum, device)
        self.embed = nn.Linear(in_dim, width, bias=False, device=device)
        blocks = [FlashBlock(width, momentum, device) for _ in range(num_blocks)]
        self.blocks = nn.ModuleList(blocks)
        self.rms = nn.RMSNorm(width, eps=1e-6, device=device)

    def forward(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        x = self.embed(self.bn_in(x, train))
        for block in self.blocks:
            x = block(x, train)
        return self.rms(x)


class FlashSACActor(nn.Module):
    """FlashSAC's tanh-Gaussian policy (see the module docstring)."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        hidden_dim: int = _FLASH.actor_hidden_dim,
        num_blocks: int = _FLASH.num_blocks,
        log_std_min: float = _FLASH.log_std_min,
        log_std_max: float = _FLASH.log_std_max,
        momentum: float = _FLASH.batch_norm_momentum,
        noise_repeat_max: int = _FLASH.noise_repeat_max,
        noise_repeat_exponent: float = _FLASH.noise_repeat_exponent,
        device: Any = None,
    ) -> None:
        super().__init__()
        self.num_blocks = num_blocks
        self.trunk = FlashTrunk(n_obs, hidden_dim, num_blocks, momentum, device)
        self.fc_mu = nn.Linear(hidden_dim, n_act, device=device)
        self.fc_logstd = nn.Linear(hidden_dim, n_act, device=device)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        k = torch.arange(1, noise_repeat_max + 1, dtype=torch.float64)
        #: P(hold k steps) for k = 1..noise_repeat_max (a truncated Zeta distribution).
        self.hold_probs = (k**-noise_repeat_exponent / (k**-noise_repeat_exponent).sum()).float()
        #: Each env's current draw `[N, A]` and the steps it is still held for `[N]`.
        self.noise: torch.Tensor | None = None
        self.hold: torch.Tensor | None = None
        #: The learner's actor optimiser steps when these weights were taken (its learner keeps
        #: it equal to them; a collector's copy receives it with the weights). While it is 0,
        #: `explore` draws uniform random actions: the JAX core's warm-up.
        self.register_buffer("updates", torch.zeros((), dtype=torch.long, device=device))

    @classmethod
    def from_config(
        cls,
        config: FlashSACConfig,
        obs_dim: int,
        action_dim: int,
        device: Any = None,
        **kw: Any,
    ) -> Any:
        """The actor of a run with ``config``."""
        return cls(obs_dim, action_dim, **cls.settings(config), device=device, **kw)

    @staticmethod
    def settings(config: FlashSACConfig) -> dict[str, Any]:
        """The constructor's settings that ``config`` fixes (plain scalars)."""
        return {
            "hidden_dim": config.actor_hidden_dim,
            "num_blocks": config.num_blocks,
            "log_std_min": config.log_std_min,
            "log_std_max": config.log_std_max,
            "momentum": config.batch_norm_momentum,
            "noise_repeat_max": config.noise_repeat_max,
            "noise_repeat_exponent": config.noise_repeat_exponent,
        }

    def mean_and_log_std(
        self, obs: torch.Tensor, train: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-squash `(mean, log_std)`, each `[N, A]`; `train`: BatchNorm on the batch."""
        z = self.trunk(obs, train)
        half_range = 0.5 * (self.log_std_max - self.log_std_min)
        log_std = self.log_std_min + half_range * (torch.tanh(self.fc_logstd(z)) + 1.0)
        return self.fc_mu(z), log_std

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)`` with the running statistics (what the JAX actor's evaluation does)."""
        return torch.tanh(self.mean_and_log_std(obs)[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.deterministic(obs)

    @torch.no_grad()
    def explore(
        self, obs: torch.Tensor, dones: torch.Tensor | bool | None = None,
        deterministic: bool = False,
    ) -> torch.Tensor:  # fmt: skip
        """``tanh(mean + std * n)``, each env's ``n`` redrawn when its hold runs out (``dones``
        does not restart it); uniform random actions in ``[-1, 1]`` while ``updates`` is 0
        (before the learner's first actor step). A bool second argument means
        ``deterministic``."""
        if isinstance(dones, bool):
            deterministic = dones
        if deterministic:
            return self.deterministic(obs)
        if int(self.updates) == 0:
            shape = (obs.shape[0], self.fc_mu.out_features)
            return torch.rand(shape, device=obs.device) * 2.0 - 1.0
        mean, log_std = self.mean_and_log_std(obs)
        if self.noise is None or self.noise.shape != mean.shape:
            self.noise = torch.zeros_like(mean)
            self.hold = torch.zeros(mean.shape[0], dtype=torch.long, device=mean.device)
        redraw = self.hold <= 0
        self.noise = torch.where(redraw[:, None], torch.randn_like(mean), self.noise)
        probs = self.hold_probs.to(mean.device)
        holds = torch.multinomial(probs, mean.shape[0], replacement=True) + 1
        self.hold = torch.where(redraw, holds, self.hold) - 1
        return torch.tanh(mean + torch.exp(log_std) * self.noise)

    def _load_from_state_dict(self, state_dict, prefix, *args: Any) -> None:
        """A state without ``updates`` (saved before the buffer existed) loads and keeps this
        actor's count (a learner sets it from its optimiser right after loading)."""
        state_dict.setdefault(f"{prefix}updates", self.updates.detach().clone())
        super()._load_from_state_dict(state_dict, prefix, *args)

    def jax_rows(self, prefix: str = "actor", root: JaxPath = ("actor_params", "params")) -> list:
        """The weights' table: ``{prefix}.trunk`` / ``fc_mu`` / ``fc_logstd`` <-> the JAX
        actor's ``trunk`` / ``mu`` / ``log_std`` under ``root`` (member 0), its BatchNorm
        statistics under ``actor_stats``."""
        stats = (root[0].replace("_params", "_stats"), "batch_stats", "trunk")
        rows = flash_trunk_rows(f"{prefix}.trunk", (*root, "trunk"), stats, self.num_blocks)
        for torch_name, jax_name in (("fc_mu", "mu"), ("fc_logstd", "log_std")):
            rows += [
                Row(f"{prefix}.{torch_name}.weight", (*root, jax_name, "kernel", 0), "transpose"),
                Row(f"{prefix}.{torch_name}.bias", (*root, jax_name, "bias", 0), "copy"),
            ]
        return rows
