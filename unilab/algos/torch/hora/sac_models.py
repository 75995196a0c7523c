"""HORA-SAC's actor under the reference's name and constructor: ``HoraSACActor``.

It is the torch ``PrivilegedSACActor`` (``unilab_jax.torch.actors``), the layout the
learner, the collector and the JAX converters share: ``priv_encoder`` ((Linear ->
LayerNorm|Identity -> SiLU) per width), ``priv_projection`` (a Linear when the encoder's last
width is not the embedding's, else Identity), ``z = tanh(...)``, then FastSAC's trunk ``net``
and heads ``fc_mu`` / ``fc_logstd`` on ``[obs | z]``. It takes the reference's calls:
``actor(obs, priv_info)``, ``get_actions_and_log_probs(obs, priv_info)``, ``explore(obs,
priv_info, deterministic=False)``, ``encode_privileged_info(priv_info)``, and the joined input
``[obs | priv_info]`` alone as well.

Differences from the reference's ``HoraSACActor``: the trunk and heads keep FastSAC's names
(``net``, ``fc_mu``, ``fc_logstd``; the reference's ``actor_trunk``, ``action_mean_head``,
``action_logstd_head``), so a reference actor's state_dict does not load into it as it is (a
whole reference checkpoint does, into ``HoraSACLearner``: ``reference_names``); the trunk always
has a norm slot (Identity without LayerNorm, as FastSAC's); ``use_tanh=False`` (an unsquashed
Gaussian) is refused, as FastSAC's learner refuses it; ``noise_correlation`` (ours) is
accepted; no ``as_export_module`` (the core's export refuses a privileged actor: a deployed
policy cannot observe its privileged values).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from unilab_jax.torch.actors import PrivilegedSACActor

__all__ = ["HoraSACActor", "PrivilegedSACActor"]


class HoraSACActor(PrivilegedSACActor):
    """``PrivilegedSACActor`` built with the reference's argument names and order."""

    def __init__(
        self,
        obs_dim: int,
        priv_info_dim: int,
        action_dim: int,
        *,
        hidden_dim: int = 512,
        priv_info_embed_dim: int = 9,
        priv_mlp_hidden_dims: Sequence[int] = (256, 128, 9),
        log_std_max: float = 0.0,
        log_std_min: float = -5.0,
        use_tanh: bool = True,
        use_layer_norm: bool = True,
        device: str | torch.device = "cpu",
        action_scale: torch.Tensor | None = None,
        action_bias: torch.Tensor | None = None,
        noise_correlation: float = 0.0,
    ) -> None:
        if not use_tanh:
            raise ValueError(
                "HoraSACActor(use_tanh=False) is not supported: the SAC actor is the JAX core's "
                "tanh-squashed Gaussian (FastSACLearner refuses use_tanh=False too)"
            )
        if int(priv_info_dim) <= 0:
            raise ValueError(f"HORA-SAC requires positive priv_info_dim, got {priv_info_dim}.")
        super().__init__(
            int(obs_dim), int(action_dim), int(priv_info_dim), hidden_dim, use_layer_norm,
            log_std_min, log_std_max, device, noise_correlation, int(priv_info_embed_dim),
            tuple(int(width) for width in priv_mlp_hidden_dims),
        )  # fmt: skip
        with torch.no_grad():
            if action_scale is not None:
                self.action_scale.copy_(torch.as_tensor(action_scale, dtype=torch.float32))
            if action_bias is not None:
                self.action_bias.copy_(torch.as_tensor(action_bias, dtype=torch.float32))
        self.priv_info_dim = self.priv_dim
        self.action_dim = int(action_dim)
        self.priv_info_embed_dim = int(priv_info_embed_dim)
        self.use_tanh = True

    def encode_privileged_info(self, priv_info: torch.Tensor) -> torch.Tensor:
        """The embedding ``z = tanh(priv_projection(priv_encoder(priv_info)))``."""
        return torch.tanh(self.priv_projection(self.priv_encoder(priv_info)))
