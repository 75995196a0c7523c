"""One torch actor per algorithm, in the JAX actors' layout (``unilab_jax.algos.networks``).

- ``SACActor`` (FastSAC): tanh-Gaussian, ``(Linear -> LayerNorm|Identity -> SiLU) x 3`` of
  widths ``H, H/2, H/4`` (a norm slot in every layer: ``net.0, net.3, net.6``), zero-initialised
  ``fc_mu`` / ``fc_logstd`` heads; the mean is clamped to +-10 with NaN -> 0, ``log_std`` squashed
  into ``[log_std_min, log_std_max]``; deterministic action ``tanh(mean)``.
- ``PrivilegedSACActor`` (HORA-SAC): ``SACActor`` on ``[obs | tanh(encoder(priv))]``, its
  input ``[obs | priv]`` (the privileged values: the critic observation's columns beyond the
  actor's); the encoder ``priv_encoder`` ((Linear -> LayerNorm|Identity -> SiLU) per width,
  ``priv_projection`` when its last width is not the embedding's).
- ``TD3Actor`` (FastTD3): ``(Linear -> ReLU) x 3 -> Linear -> tanh`` (``net.0, net.2, net.4``,
  ``fc_mu.0``), with per-env exploration stds drawn from ``[std_min, std_max]`` (a plain
  attribute, not in the ``state_dict``); deterministic action ``tanh(mu(obs))``.

Both can draw exploration noise correlated over time (``noise_correlation`` rho: an AR(1) of unit
variance per env, redrawn on episode start), as the JAX core does. Each actor builds itself
from its algorithm's config (``from_config``, ``settings``), gives its deterministic action
(``deterministic``) and lists its weights' JAX leaves (``jax_rows``, ``unilab_jax.torch.weights``).
The facade's learners (``unilab.algos.torch.fast_sac`` / ``fast_td3``) train these classes and
re-export them under their reference names; ``unilab_jax.policy.export`` exports them. This
module imports torch; the core imports it only where torch is needed (the algorithm registry
names each actor as ``"module:class"``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from unilab_jax.algos.hyperparams import HoraSACConfig, SACConfig, TD3Config
from unilab_jax.torch.weights import JaxPath, linear_rows, trunk_rows

__all__ = [
    "TD3_LOG_STD_MAX",
    "TD3_LOG_STD_MIN",
    "PrivilegedSACActor",
    "SACActor",
    "TD3Actor",
    "hidden_layers",
    "sample_tanh_gaussian",
]

_SAC = SACConfig()
_HORA = HoraSACConfig()
_TD3 = TD3Config()
_LOG_2PI = math.log(2.0 * math.pi)
# The reference yaml's exploration range (log std); TD3Config holds exp() of these.
TD3_LOG_STD_MIN = -1.6
TD3_LOG_STD_MAX = -0.22
# Reference actor buffers that older checkpoints carry; they are state, not weights, here.
_LEGACY_ACTOR_KEYS = ("noise_scales", "log_std_min", "log_std_max", "std_min", "std_max")


def hidden_layers(
    in_dim: int,
    hidden_dim: int,
    activation: str,
    use_layer_norm: bool,
    norm_slot: bool,
    device: torch.device | str | None = None,
) -> list[nn.Module]:
    """The three hidden layers `H, H/2, H/4`: `Linear -> [norm] -> activation` each.

    `norm_slot` keeps a position for the norm even without LayerNorm (FastSAC's layout);
    without it the norm is left out entirely (FastTD3's layout).
    """
    layers: list[nn.Module] = []
    for width in (hidden_dim, hidden_dim // 2, hidden_dim // 4):
        layers.append(nn.Linear(in_dim, width, device=device))
        if use_layer_norm:
            # eps 1e-5, the torch default, which the flax modules use as well.
            layers.append(nn.LayerNorm(width, device=device))
        elif norm_slot:
            layers.append(nn.Identity())
        layers.append({"relu": nn.ReLU, "silu": nn.SiLU}[activation]())
        in_dim = width
    return layers


def sample_tanh_gaussian(
    mean: torch.Tensor,
    log_std: torch.Tensor,
    noise: torch.Tensor,
    action_scale: torch.Tensor,
    action_bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-probability, `[B, A] -> ([B, A], [B])`.

    `u = mean + exp(log_std) * noise`, `y = tanh(u)`, action `y * scale + bias`,
    `log pi = sum_dims [log N(u) - log(1 - y^2 + 1e-6) - log(scale + 1e-6)]`. The Gaussian term
    is written from `noise` (not from `u - mean`), as the JAX core does, and `log(scale + 1e-6)`
    is taken in float64 so that it rounds like the JAX Python constant.
    """
    u = mean + torch.exp(log_std) * noise
    y = torch.tanh(u)
    gaussian = -0.5 * (torch.square(noise) + 2.0 * log_std + _LOG_2PI)
    log_scale = torch.log(action_scale.to(torch.float64) + 1e-6).to(mean.dtype)
    log_prob = gaussian - torch.log(1.0 - torch.square(y) + 1e-6) - log_scale
    return y * action_scale + action_bias, torch.sum(log_prob, dim=-1)


class _Actor(nn.Module):
    """What both actors share: building from a config and the correlated noise's update
    (``noise_correlation`` and ``noise`` are each actor's attributes; no class annotations:
    TorchScript would read them)."""

    @classmethod
    def from_config(
        cls, config: Any, obs_dim: int, action_dim: int, device: Any = None, **kwargs: Any
    ) -> Any:
        """The actor of a run with ``config`` (its algorithm's config): the settings it fixes
        (each actor's ``settings(config)``) and ``kwargs``, further constructor arguments (TD3:
        ``num_envs``)."""
        return cls(obs_dim, action_dim, **cls.settings(config), device=device, **kwargs)

    def _next_noise(self, fresh: torch.Tensor, done: torch.Tensor | None) -> torch.Tensor:
        """The AR(1) step of each env's unit-variance noise, ``n <- rho * n + sqrt(1 - rho^2)
        * fresh``, restarted at ``fresh`` where ``done`` (``[N, 1]`` bool) is set."""
        if self.noise is None or self.noise.shape != fresh.shape:
            self.noise = torch.randn_like(fresh)
        rho = self.noise_correlation
        carried = rho * self.noise + math.sqrt(1.0 - rho * rho) * fresh
        if done is not None:
            carried = torch.where(done, fresh, carried)
        self.noise = carried
        return carried


class SACActor(_Actor):
    """Tanh-Gaussian policy: `(Linear -> LayerNorm|Identity -> SiLU) x 3`, zero-init heads."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        hidden_dim: int = _SAC.actor_hidden_dim,
        use_layer_norm: bool = _SAC.use_layer_norm,
        log_std_min: float = _SAC.log_std_min,
        log_std_max: float = _SAC.log_std_max,
        device: torch.device | str | None = None,
        noise_correlation: float = _SAC.noise_correlation,
    ) -> None:
        super().__init__()
        self.use_layer_norm = use_layer_norm
        self.net = nn.Sequential(
            *hidden_layers(n_obs, hidden_dim, "silu", use_layer_norm, norm_slot=True, device=device)
        )
        self.fc_mu = nn.Linear(hidden_dim // 4, n_act, device=device)
        self.fc_logstd = nn.Linear(hidden_dim // 4, n_act, device=device)
        # Zero heads: the first policy is mean 0 with log_std at the middle of its range.
        for head in (self.fc_mu, self.fc_logstd):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        #: Step-to-step correlation of the exploration draw (``SACConfig.noise_correlation``)
        #: and each env's current draw `[num_envs, A]` (None until drawn; not a weight).
        self.noise_correlation = noise_correlation
        self.noise: torch.Tensor | None = None
        self.register_buffer("action_scale", torch.ones(n_act, device=device))
        self.register_buffer("action_bias", torch.zeros(n_act, device=device))

    def mean_and_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-squash `(mean, log_std)`, each `[B, A]`, with the reference's NaN guards."""
        x = self.net(obs)
        half_range = 0.5 * (self.log_std_max - self.log_std_min)
        log_std = self.log_std_min + half_range * (torch.tanh(self.fc_logstd(x)) + 1.0)
        mean = torch.nan_to_num(self.fc_mu(x).clamp(-10.0, 10.0), nan=0.0)
        log_std = torch.nan_to_num(log_std, nan=self.log_std_min)
        return mean, log_std

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`(tanh(mean) * scale + bias, mean, log_std)`."""
        mean, log_std = self.mean_and_log_std(obs)
        return torch.tanh(mean) * self.action_scale + self.action_bias, mean, log_std

    def get_actions_and_log_probs(
        self, obs: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised `(actions [B, A], log_probs [B], log_std [B, A])`.

        `noise` (standard normal `[B, A]`) replaces the internal draw when given.
        """
        mean, log_std = self.mean_and_log_std(obs)
        if noise is None:
            noise = torch.randn_like(mean)
        actions, log_probs = sample_tanh_gaussian(
            mean, log_std, noise, self.action_scale, self.action_bias
        )
        return actions, log_probs, log_std

    @torch.no_grad()
    def explore(
        self,
        obs: torch.Tensor,
        dones: torch.Tensor | bool | None = None,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """A tanh-Gaussian sample (or `tanh(mean)` when deterministic).

        With `noise_correlation` rho > 0 the standard normal draw is an AR(1) process per env,
        `n <- rho * n + sqrt(1 - rho^2) * N(0, 1)`, redrawn where `dones > 0`; otherwise
        `dones` is ignored (the reference). As in the reference, a bool passed as the second
        argument means `deterministic`.
        """
        if isinstance(dones, bool):
            deterministic, dones = dones, None
        if deterministic:
            return self(obs)[0]
        if self.noise_correlation == 0:
            return self.get_actions_and_log_probs(obs)[0]
        mean, log_std = self.mean_and_log_std(obs)
        done = None if dones is None else dones.reshape(-1, 1).to(obs.device) > 0
        noise = self._next_noise(torch.randn_like(mean), done)
        return sample_tanh_gaussian(mean, log_std, noise, self.action_scale, self.action_bias)[0]

    @staticmethod
    def settings(config: SACConfig) -> dict[str, Any]:
        """The constructor's settings that ``config`` fixes (plain scalars)."""
        return {
            "hidden_dim": config.actor_hidden_dim,
            "use_layer_norm": config.use_layer_norm,
            "log_std_min": config.log_std_min,
            "log_std_max": config.log_std_max,
            "noise_correlation": config.noise_correlation,
        }

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action, ``tanh(mean) * scale + bias`` (what ``Policy.act`` and
        the JAX actor's evaluation compute)."""
        return self(obs)[0]

    def jax_rows(self, prefix: str = "actor", root: JaxPath = ("actor_params", "params")) -> list:
        """The weights' table: ``{prefix}.net`` / ``fc_mu`` / ``fc_logstd`` <-> the JAX actor's
        ``trunk`` / ``mu`` / ``log_std`` under ``root``."""
        rows = trunk_rows(f"{prefix}.net", (*root, "trunk"), 3, self.use_layer_norm, None)
        rows += linear_rows(f"{prefix}.fc_mu", (*root, "mu"))
        return rows + linear_rows(f"{prefix}.fc_logstd", (*root, "log_std"))


class PrivilegedSACActor(SACActor):
    """HORA-SAC's tanh-Gaussian policy on ``[obs | priv]`` (``n_obs`` observation columns, then
    ``priv_dim`` privileged values): ``SACActor``'s trunk and heads on ``[obs | z]``, ``z =
    tanh(priv_projection(priv_encoder(priv)))`` of ``priv_embed_dim`` values. The reference's
    ``HoraSACActor`` takes ``(obs, priv_info)`` as two tensors; this actor takes them joined, so
    ``explore`` / ``deterministic`` / ``get_actions_and_log_probs`` are ``SACActor``'s. Each of
    them (and ``forward``) also takes the reference's call, the two tensors apart (``explore(obs,
    priv_info, deterministic=False)``): an input of ``n_obs`` columns is the observation alone,
    and the argument after it the privileged values, joined to it first."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        priv_dim: int,
        hidden_dim: int = _HORA.actor_hidden_dim,
        use_layer_norm: bool = _HORA.use_layer_norm,
        log_std_min: float = _HORA.log_std_min,
        log_std_max: float = _HORA.log_std_max,
        device: torch.device | str | None = None,
        noise_correlation: float = _HORA.noise_correlation,
        priv_embed_dim: int = _HORA.priv_embed_dim,
        priv_hidden_dims: tuple[int, ...] = _HORA.priv_hidden_dims,
    ) -> None:
        super().__init__(
            n_obs + priv_embed_dim, n_act, hidden_dim, use_layer_norm, log_std_min, log_std_max,
            device, noise_correlation,
        )  # fmt: skip
        self.obs_dim = int(n_obs)
        self.priv_dim = int(priv_dim)
        self.priv_layers = len(priv_hidden_dims)
        layers: list[nn.Module] = []
        width_in = priv_dim
        for width in priv_hidden_dims:
            layers.append(nn.Linear(width_in, width, device=device))
            layers.append(nn.LayerNorm(width, device=device) if use_layer_norm else nn.Identity())
            layers.append(nn.SiLU())
            width_in = width
        self.priv_encoder = nn.Sequential(*layers)
        self.priv_projection: nn.Module = (
            nn.Linear(width_in, priv_embed_dim, device=device)
            if width_in != priv_embed_dim
            else nn.Identity()
        )

    def mean_and_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-squash ``(mean, log_std)`` of the input ``[obs | priv]``."""
        own, priv = obs[..., : self.obs_dim], obs[..., self.obs_dim :]
        z = torch.tanh(self.priv_projection(self.priv_encoder(priv)))
        return super().mean_and_log_std(torch.cat([own, z], dim=-1))

    def _joined(self, obs: torch.Tensor, priv_info: Any) -> tuple[torch.Tensor, bool]:
        """``(the input [obs | priv], whether priv_info was used)``: ``obs`` itself when it
        already holds both (``n_obs + priv_dim`` columns), else ``obs`` joined to the tensor
        ``priv_info`` (the reference's call; a missing one raises ``ValueError``)."""
        if obs.shape[-1] != self.obs_dim:
            return obs, False
        if not isinstance(priv_info, torch.Tensor):
            raise ValueError(
                f"{type(self).__name__} reads [obs | priv_info]: given {self.obs_dim} "
                f"observation columns, it needs priv_info [..., {self.priv_dim}] too"
            )
        return torch.cat([obs, priv_info.to(device=obs.device, dtype=obs.dtype)], dim=-1), True

    def forward(
        self, obs: torch.Tensor, priv_info: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(tanh(mean) * scale + bias, mean, log_std)`` of ``[obs | priv]`` (or of ``obs``
        and ``priv_info`` apart, the reference's call)."""
        return super().forward(self._joined(obs, priv_info)[0])

    def get_actions_and_log_probs(
        self, obs: torch.Tensor, *args: torch.Tensor | None, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``SACActor``'s on ``[obs | priv]`` (``(input, noise=None)``), or the reference's
        ``(obs, priv_info)`` apart (then ``noise`` by keyword or third)."""
        if len(args) > 2:
            raise TypeError("get_actions_and_log_probs takes at most 3 positional arguments")
        second = args[0] if args else None
        joined, used = self._joined(obs, second)
        rest = args[1:] if used else args
        if rest:
            noise = rest[0] if noise is None else noise
        return super().get_actions_and_log_probs(joined, noise)

    @torch.no_grad()
    def explore(
        self,
        obs: torch.Tensor,
        priv_info: torch.Tensor | bool | None = None,
        deterministic: bool = False,
        dones: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``SACActor.explore`` of ``[obs | priv]`` (``explore(input, dones=..., deterministic=
        ...)``; a second positional tensor is then ``dones``), or the reference's
        ``explore(obs, priv_info, deterministic=False)`` with the two apart."""
        if isinstance(priv_info, bool):  # SACActor's explore(obs, True): deterministic
            deterministic, priv_info = priv_info, None
        joined, used = self._joined(obs, priv_info)
        if not used and priv_info is not None:
            if dones is not None:
                raise TypeError("explore of a joined input: dones given twice")
            dones = priv_info
        return super().explore(joined, dones, deterministic)

    def deterministic(
        self, obs: torch.Tensor, priv_info: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``tanh(mean) * scale + bias`` of ``[obs | priv]`` (or of the two apart)."""
        return self(obs, priv_info)[0]

    @staticmethod
    def settings(config: HoraSACConfig) -> dict[str, Any]:
        """The constructor's settings that ``config`` fixes (``priv_dim`` is the task's)."""
        return {
            **SACActor.settings(config),
            "priv_embed_dim": config.priv_embed_dim,
            "priv_hidden_dims": tuple(config.priv_hidden_dims),
        }

    def jax_rows(self, prefix: str = "actor", root: JaxPath = ("actor_params", "params")) -> list:
        """``SACActor``'s table plus ``priv_encoder`` / ``priv_projection`` <-> the JAX actor's
        ``priv_encoder`` / ``priv_projection``."""
        rows = super().jax_rows(prefix, root)
        rows += trunk_rows(
            f"{prefix}.priv_encoder", (*root, "priv_encoder"), 3, self.use_layer_norm, None,
            layers=self.priv_layers,
        )  # fmt: skip
        if isinstance(self.priv_projection, nn.Linear):
            rows += linear_rows(f"{prefix}.priv_projection", (*root, "priv_projection"))
        return rows


class TD3Actor(_Actor):
    """Deterministic policy `(Linear -> ReLU) x 3 -> Linear -> tanh`, per-env exploration."""

    def __init__(
        self,
        obs_dim: int,
        n_act: int,
        num_envs: int = 1,
        init_scale: float = _TD3.init_scale,
        hidden_dim: int = _TD3.actor_hidden_dim,
        log_std_min: float = TD3_LOG_STD_MIN,
        log_std_max: float = TD3_LOG_STD_MAX,
        device: torch.device | str | None = None,
        noise_correlation: float = _TD3.noise_correlation,
    ) -> None:
        super().__init__()
        # `obs_dim`: the reference's name for the first argument (`TD3Actor(obs_dim=...)`).
        layers = hidden_layers(obs_dim, hidden_dim, "relu", False, norm_slot=False, device=device)
        self.net = nn.Sequential(*layers)
        self.fc_mu = nn.Sequential(nn.Linear(hidden_dim // 4, n_act, device=device), nn.Tanh())
        nn.init.normal_(self.fc_mu[0].weight, 0.0, init_scale)
        nn.init.zeros_(self.fc_mu[0].bias)
        self.std_min = math.exp(log_std_min)
        self.std_max = math.exp(log_std_max)
        # A plain attribute (not a buffer): exploration state, kept out of `state_dict`.
        self.noise_scales = self.sample_noise_scales(num_envs, device)
        #: Step-to-step correlation of the exploration noise (``TD3Config.noise_correlation``)
        #: and each env's current unit-variance noise `[num_envs, A]` (None until drawn).
        self.noise_correlation = noise_correlation
        self.noise: torch.Tensor | None = None
        self.register_load_state_dict_pre_hook(_drop_legacy_actor_keys)

    def sample_noise_scales(
        self, num_envs: int, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Per-env std `[num_envs, 1]`, uniform in `[std_min, std_max]`."""
        u = torch.rand(num_envs, 1, device=device)
        return u * (self.std_max - self.std_min) + self.std_min

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action `tanh(mu(obs))`: `[B, A]` in [-1, 1]."""
        return self.fc_mu(self.net(obs))

    @torch.no_grad()
    def explore(
        self,
        obs: torch.Tensor,
        dones: torch.Tensor | bool | None = None,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """`clip(mu(obs) + n * scale_env, -1, 1)`; envs with `dones > 0` get a new scale.

        `n` is a fresh `N(0, 1)` draw, or with `noise_correlation` rho > 0 an AR(1) process
        `n <- rho * n + sqrt(1 - rho^2) * N(0, 1)` per env, redrawn where `dones > 0`.
        A bool passed as the second argument means `deterministic`, as in the reference.
        """
        if isinstance(dones, bool):
            deterministic, dones = dones, None
        action = self(obs)
        if deterministic:
            return action
        num_envs = obs.shape[0]
        if self.noise_scales.shape[0] != num_envs or self.noise_scales.device != obs.device:
            self.noise_scales = self.sample_noise_scales(num_envs, obs.device)
        done = None if dones is None else dones.reshape(-1, 1).to(obs.device) > 0
        if done is not None:
            fresh = self.sample_noise_scales(num_envs, obs.device)
            self.noise_scales = torch.where(done, fresh, self.noise_scales)
        noise = torch.randn_like(action)
        if self.noise_correlation > 0:
            noise = self._next_noise(noise, done)
        return torch.clamp(action + noise * self.noise_scales, -1.0, 1.0)

    @staticmethod
    def settings(config: TD3Config) -> dict[str, Any]:
        """The constructor's settings that ``config`` fixes (plain scalars)."""
        return {
            "init_scale": config.init_scale,
            "hidden_dim": config.actor_hidden_dim,
            "log_std_min": math.log(config.std_min),
            "log_std_max": math.log(config.std_max),
            "noise_correlation": config.noise_correlation,
        }

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action ``tanh(mu(obs))``: the actor without exploration noise."""
        return self(obs)

    def jax_rows(self, prefix: str = "actor", root: JaxPath = ("actor_params", "params")) -> list:
        """The weights' table: ``{prefix}.net`` / ``fc_mu.0`` <-> the JAX actor's ``trunk`` /
        ``mu`` under ``root``."""
        rows = trunk_rows(f"{prefix}.net", (*root, "trunk"), 2, False, None)
        return rows + linear_rows(f"{prefix}.fc_mu.0", (*root, "mu"))


def _drop_legacy_actor_keys(
    module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
) -> None:
    """Load-time hook: reference checkpoints keep exploration buffers; never load them."""
    del module, args
    for key in _LEGACY_ACTOR_KEYS:
        state_dict.pop(prefix + key, None)
