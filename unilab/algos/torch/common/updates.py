"""The update mechanics every torch learner and runner uses.

Written to mirror `unilab_jax.algos.gradients.gradient_step` / `polyak_update` and the JAX
loop's update schedule:

- `guarded_step`: backward into the given parameters only, optional gradient all-reduce
  (`world_size > 1`), global L2 norm (sum of squares over all tensors, as `optax.tree.norm`),
  clipping with `torch.nn.utils.clip_grad_norm_`'s scale `min(1, max / (norm + 1e-6))`, then the
  optimiser step, which is skipped when the loss *or* the gradient norm is non-finite (the
  reference checked the loss only, so a NaN gradient could still poison its weights). Under
  fp16 autocast a `torch.amp.GradScaler` scales the loss (`guarded_step(..., scaler=)`).
- `temperature_step`: SAC's temperature step, `-alpha * entropy_error` (no clipping).
- `adamw` / `sac_optimizers`: the learners' optimisers; `resolve_amp_dtype` and `AMP_DEVICES`:
  the reference's mixed-precision settings.
- `polyak_update`: `target <- target * (1 - tau) + online * tau`.
- `metrics_to_floats`: the learners return metrics as floats after a single host sync.
- `run_updates`: the update schedule of one learner iteration, the only copy on the torch side:
  `updates_per_step` updates on consecutive slices of one sampled batch, the critic every
  update, the actor on `u % policy_frequency == 0`, the target every update; mean metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = [
    "AMP_DEVICES",
    "adamw",
    "guarded_step",
    "metrics_to_floats",
    "polyak_update",
    "resolve_amp_dtype",
    "run_updates",
    "sac_optimizers",
    "temperature_step",
]

#: The devices on which the reference autocasts with ``use_amp`` (elsewhere it is ignored).
AMP_DEVICES = ("cuda", "xpu")


def guarded_step(
    loss: torch.Tensor,
    params: Iterable[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float,
    world_size: int = 1,
    scaler: torch.amp.GradScaler | None = None,
) -> tuple[torch.Tensor, bool]:
    """Backward `loss` into `params` and take one optimiser step unless it is non-finite.

    Returns `(grad_norm, stepped)`; `grad_norm` is the pre-clipping global norm (after the
    all-reduce). Only `params` receive gradients, so e.g. the actor loss leaves the critic's
    `.grad` untouched. `max_grad_norm <= 0` disables clipping. With `scaler` (fp16 autocast, as
    the reference's GradScaler path) the backward is of `scaler.scale(loss)`, the gradients are
    unscaled (`scaler.unscale_`) before the all-reduce, the norm and the clipping, the step is
    `scaler.step` and `scaler.update()` follows either way (halving the scale after an overflow).
    """
    params = list(params)
    optimizer.zero_grad(set_to_none=True)
    (loss if scaler is None else scaler.scale(loss)).backward(inputs=params)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    if scaler is not None:
        scaler.unscale_(optimizer)  # in place, into `grads`
    if world_size > 1:
        # DDP semantics: average the gradients before norm, clipping and the step.
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
    grad_norm = torch.sqrt(sum(torch.sum(g * g) for g in grads))
    if max_grad_norm > 0:
        scale = torch.clamp(max_grad_norm / (grad_norm + 1e-6), max=1.0)
        torch._foreach_mul_(grads, scale)
    stepped = bool(torch.isfinite(loss) & torch.isfinite(grad_norm))
    if stepped and scaler is None:
        optimizer.step()
    elif scaler is not None:
        if stepped:
            scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm.detach(), stepped


def temperature_step(learner: Any, entropy_error: torch.Tensor) -> torch.Tensor:
    """A SAC learner's temperature step: the loss `-exp(log_alpha) * entropy_error` (a
    constant, `mean logpi + target_entropy`), one unclipped `guarded_step` of
    `learner.log_alpha` with `learner.alpha_optimizer` over `learner.world_size` ranks.
    Returns the loss."""
    log_alpha = learner.log_alpha
    loss = -(torch.exp(log_alpha.reshape(())) * entropy_error)
    guarded_step(loss, [log_alpha], learner.alpha_optimizer, 0.0, learner.world_size)
    return loss


def adamw(
    params: Iterable[torch.Tensor],
    lr: float,
    weight_decay: float,
    device: torch.device,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.AdamW:
    """`torch.optim.AdamW`, fused on CUDA; without decay it is Adam."""
    fused = device.type == "cuda"
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=fused)


def sac_optimizers(
    learner: Any, betas: tuple[float, float] = (0.9, 0.999)
) -> tuple[torch.optim.AdamW, torch.optim.AdamW, torch.optim.AdamW]:
    """A SAC learner's `(actor, critic, temperature)` optimisers: AdamW on `learner.actor` and
    `learner.qnet` (`config.actor_lr` / `critic_lr`, `config.weight_decay`) and, without decay
    (Adam, the JAX core's), on `learner.log_alpha` (`config.alpha_lr`)."""
    cfg, device = learner.config, learner.device
    return (
        adamw(learner.actor.parameters(), cfg.actor_lr, cfg.weight_decay, device, betas),
        adamw(learner.qnet.parameters(), cfg.critic_lr, cfg.weight_decay, device, betas),
        adamw([learner.log_alpha], cfg.alpha_lr, 0.0, device, betas),
    )


def resolve_amp_dtype(amp_dtype: str, algo: str = "FastSAC") -> torch.dtype:
    """The autocast dtype of ``amp_dtype`` (case-insensitive): ``"auto"`` and ``"bf16"`` give
    bfloat16, ``"fp16"`` float16; anything else raises ``ValueError`` in the reference's words
    (``algo``: the learner they name)."""
    dtypes = {"auto": torch.bfloat16, "fp16": torch.float16, "bf16": torch.bfloat16}
    try:
        return dtypes[str(amp_dtype).lower()]
    except KeyError:
        raise ValueError(
            f"{algo} amp_dtype must be one of: auto, fp16, bf16; got {amp_dtype!r}"
        ) from None


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """`target <- target * (1 - tau) + online * tau` over parameters (buffers are constants)."""
    target_params = list(target.parameters())
    online_params = list(online.parameters())
    torch._foreach_mul_(target_params, 1.0 - tau)
    scaled = torch._foreach_mul(online_params, tau)
    torch._foreach_add_(target_params, scaled)


def metrics_to_floats(metrics: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Scalar metrics as Python floats, with one device-to-host copy for all of them."""
    values = [torch.as_tensor(v, dtype=torch.float32).reshape(()) for v in metrics.values()]
    return dict(zip(metrics, torch.stack(values).cpu().tolist(), strict=True))


def run_updates(
    learner: Any,
    batch: Mapping[str, torch.Tensor],
    updates_per_step: int,
    policy_frequency: int,
    *,
    rows: int,
    recorder: TraceRecorder | None = None,
) -> dict[str, float]:
    """`updates_per_step` updates of `learner` on consecutive `rows`-row slices of `batch`.

    Update `u` runs `update_critic`, then `update_actor` when `u % policy_frequency == 0`, then
    `soft_update_target`. Returns each metric's mean over the updates that reported it.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for u in range(updates_per_step):
        part = {k: v[u * rows : (u + 1) * rows] for k, v in batch.items()}
        with maybe_span(recorder, "learner/update_critic", cat="learner", update_idx=u):
            step_metrics = learner.update_critic(part)
        if u % policy_frequency == 0:
            with maybe_span(recorder, "learner/update_actor", cat="learner", update_idx=u):
                step_metrics.update(learner.update_actor(part))
        with maybe_span(recorder, "learner/soft_update_target", cat="learner", update_idx=u):
            learner.soft_update_target()
        for k, v in step_metrics.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}
