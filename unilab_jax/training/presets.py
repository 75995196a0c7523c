"""Per-task presets: run sizes and algorithm settings chosen by env name and by the hardware.

The bare defaults of ``TrainConfig`` / ``SACConfig`` / ``TD3Config`` are the reference's GPU
recipe for humanoid locomotion (4096 envs, batch 8192, 8 updates per env step, discount 0.97,
widths 512/768, or 1024 for TD3's critic). They are the wrong size for a DM Control task on a
laptop CPU. A preset replaces them per task family, in two scales:

- ``gpu``: a GPU-sized run (thousands of envs, large batches);
- ``cpu``: a run a few-core CPU finishes in minutes to an hour (about a hundred envs, batch 512).

``python -m unilab_jax.train`` picks the family from ``--env`` and the scale from the
hardware JAX will use (``gpu`` on a GPU or TPU, ``cpu`` otherwise; ``default_scale``), prints
the preset it applied, and lets
every flag given on the command line win (``--preset cpu|gpu|none`` forces a scale or turns
presets off; ``--config FILE`` reruns a run's recorded settings, presets aside). From Python::

    from unilab_jax.training.presets import preset_configs
    config, algo = preset_configs("playground/CartpoleBalance", "sac", scale="cpu")
    unilab_jax.train(config, algo)

The value support (``v_min`` / ``v_max``) is derived from the task's reward bounds, the discount
and the episode length (``unilab_jax.algos.c51.value_support``), so it follows the preset's
discount; one preset fixes it instead (G1's SAC on a CPU takes the reference's -20 to 20).

Where the numbers come from (every preset names its source in ``Preset.source``):

- ``dm_control/cpu``: Playground's Brax SAC sizes and discount for the DM Control Suite (128
  envs, batch 512, 8 updates per env step, discount 0.99) with widths 256; measured on a 2-core
  CPU (at discount 0.97, the preset's until 2026-12-03), our SAC at these sizes reached a
  deterministic eval of 950 on ``playground/CartpoleBalance`` after 320k env steps (997 at
  384k), where Brax's SAC needed about 1.03M. In ``bench/learning/peers.py`` (three Playground DM
  Control tasks, 414k env steps, 2 seeds, the same machine) it ran 1.14-1.30x Brax SAC's env
  steps/s with SAC and 1.46-1.60x with TD3. The discount moved to 0.99 on 4 seeds per task
  (CheetahRun's best evaluations 447 -> 594 with SAC and 365 -> 564 with TD3; see below).
- ``dm_control/gpu``: FastTD3's code defaults for Playground's DM Control tasks (1024 envs,
  batch 32,768, 2 updates per env step, widths 512/1024, discount 0.97, exploration noise std
  drawn in [0.001, 0.4] per env, target noise 0.001); SAC gets the same sizes (FastSAC has no
  DM Control recipe). Not yet measured on a GPU by this project.
- ``locomotion/gpu``: the reference's FastSAC / FastTD3 locomotion recipe (the bare defaults)
  with 50,000 iterations, its published run length for G1 walking.
- ``locomotion/cpu``: 64 envs, batch 512, 4 updates per env step, widths 128/256. Our own
  robots (not Playground's) instead get ``physics="mujoco"`` (C MuJoCo collection, the fast
  physics for robots on a CPU), 256 envs and 40,000 iterations: TD3 at these sizes walks Go1
  after about 2M env steps and the reference's G1 after 3.6M-4.6M (three seeds) on a 2-core
  CPU (``bench/learning/locomotion.py``, ``bench/reference``; ``bench/RESULTS.md``).
- ``brax/*``: the DM Control sizes with Brax's own discount, 0.99.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unilab_jax.config import TrainConfig

__all__ = [
    "FAMILIES",
    "PRESET_CHOICES",
    "SCALES",
    "Preset",
    "default_scale",
    "family_of",
    "get_preset",
    "preset_configs",
    "preset_line",
    "task_list",
]

SCALES = ("cpu", "gpu")
PRESET_CHOICES = ("auto", *SCALES, "none")


@dataclass(frozen=True)
class Preset:
    """Settings for one task family at one scale."""

    family: str
    scale: str
    train: dict[str, Any]
    """``TrainConfig`` fields."""
    algo: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per algorithm name (``"sac"``, ``"td3"``): fields of its config."""
    source: str = ""
    """Where the numbers come from."""
    algo_train: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per algorithm name: ``TrainConfig`` fields of its own recipe, over ``train`` (FlashSAC's
    run sizes differ from FastSAC's)."""

    @property
    def name(self) -> str:
        return f"{self.family}/{self.scale}"

    def algo_settings(self, algo: str) -> dict[str, Any]:
        return dict(self.algo.get(algo, {}))

    def train_settings(self, algo: str) -> dict[str, Any]:
        """The ``TrainConfig`` fields for a run of ``algo``."""
        return {**self.train, **self.algo_train.get(algo, {})}


# Our own locomotion tasks and the Playground locomotion robots (any name starting with one
# of these, after the "playground/" prefix, is locomotion).
# Playground's locomotion tasks, by their robots' names (its other tasks: DM Control). Our own
# tasks carry their family in the env registry (``register(..., family=...)``).
_PLAYGROUND_LOCOMOTION = ("Go1", "Go2", "G1", "H1", "T1", "Berkeley", "Spot", "Apollo", "Op3")
# What our robots' cpu preset adds (C MuJoCo collection; bench/learning/locomotion.py measured TD3
# walking Go1 after about 8,000 iterations and G1 after 14,000-18,000 with these).
_OUR_ROBOTS_CPU = dict(physics="mujoco", num_envs=256, max_iterations=40000, log_interval=200)
# The reference's G1 on a CPU learns with symmetry augmentation (its mirror map: envs/robots/
# g1.py); TD3 also explores with narrower noise (std 0.05-0.4, the reference's 0.2-0.8 at action
# scale 1 topples G1 at once). bench/learning/locomotion.py on the reference's G1 (256 envs, the
# CPU shared): without either, TD3 ended episodes after 65-74 steps at 3.6M env steps; TD3 with
# both ran 67% of 64 deterministic episodes to the time limit at 1.5M, SAC with symmetry 75% at
# 1.5M (bench/RESULTS.md). Go2 needs neither: SAC at the plain preset walked it by 0.26M env
# steps on three quiet seeds beside the reference (98-100% of episodes to the time limit;
# docs/robots.md; a shared-CPU pilot, evaluated only every 0.51M, walked at its first check).
# SAC on G1 takes the rest of the reference's own SAC recipe too (its FastSAC has no observation
# normaliser; 512 replay rows per env; learning after 10 iterations): one quiet 45-minute run
# each, tracking 0.66 at 8.19M env steps with our normaliser and 1024 rows, 0.76 with these
# (the reference itself: 0.86 at 6.14M; bench/RESULTS.md). And its fixed value support, -20 to
# 20 (G1's derived one is -33.3 to 13.3, its top edge just above the best discounted return):
# seed 0 then ran every episode to the time limit from 3.58M env steps instead of 4.61M, tracking
# 0.63 at 4.61M instead of 0.50 (bench/RESULTS.md, beside the reference).
# And the penalty weights the reference actually trains with: a quarter of those its G1 env
# declares. Its PenaltyCurriculum scales the env config's reward weights in place, and its
# training CLI builds the env three times from one config (twice in the main process, once more
# in the collector from the already scaled copy), so every construction halves the penalty
# weights again: the collector's env starts at 0.125 of the declared weights and its curriculum
# moves between 0.125 and 0.25 instead of 0.5 and 1 (traced in its venv, and seen in its replay:
# a least-squares fit of the stored rewards gives penalty coefficients a quarter of ours;
# bench/RESULTS.md, beside the reference). The task keeps the declared weights (the golden files
# record one construction); the preset's curriculum bounds, a quarter of the task's, make the
# same multiplicative curriculum train on the reference's effective weights. With them SAC
# walked G1 on three seeds at 3.58M-4.61M env steps, 18.3-22.9 minutes here (the reference:
# 4.61M, 44.7 minutes); at the declared weights it tracked 0.70 at best in 45 minutes.
_G1_REFERENCE_PENALTIES = dict(
    curriculum_initial_scale=0.125, curriculum_min_scale=0.125, curriculum_max_scale=0.25
)
# G1WalkRough's task file is G1WalkFlat's but for the task name (the same env section, the same
# SAC recipe), and its training builds the env the same three times: the same preset.
_G1 = ("G1WalkFlat", "G1WalkRough")
_G1_CPU_TRAIN = {
    "sac": dict(replay_buffer_n=512, learning_starts=10, env_overrides=_G1_REFERENCE_PENALTIES),
    "td3": dict(env_overrides=_G1_REFERENCE_PENALTIES),
}
# G1 on rough ground samples twice the flat preset's batch (1024 rows per update) and runs 8
# updates per iteration: 32 sampled rows per new env step, the ratio of its owner's GPU recipe (8
# updates of 8192 rows over 2048 envs). Measured here on two quiet 45-minute seeds each
# (bench/RESULTS.md, G1WalkRough beside the reference; walking: 95% of episodes to the time limit
# with tracking 0.8): at the flat preset's batch 512 and 4 updates neither seed walked (best 92% /
# 0.81 and 94% / 0.82); at batch 1024 and 4 updates seed 0 walked at 38.5 minutes (4.35M env
# steps) and seed 1 did not; at 8 updates (half the env steps per second) seed 0 walks at 42.6
# and seed 1 at 44.0 minutes, both at 2.82M env steps. The reference's seed at its CPU recipe
# reached 92% / 0.80 at 58.8 minutes. Learning rates decayed to a fifth over the 45 minutes
# (`lr_decay_steps=80_000, lr_final_ratio=0.2`, at 4 updates) were tried and are not kept: seed 1
# then walked at 44.8 minutes, seed 0 no longer did (best 91% / 0.71).
_G1_ROUGH_CPU_TRAIN = {"sac": dict(batch_size=1024, updates_per_step=8)}
_G1_CPU_ALGO = {
    "sac": dict(use_symmetry=True, obs_normalization=False, v_min=-20.0, v_max=20.0),
    "td3": dict(use_symmetry=True, std_min=0.05, std_max=0.4),
}

# The reference's G1 motion-tracking recipe: its SAC owner of G1MotionTrackingSAC
# (conf/offpolicy/task/sac/g1_motion_tracking/mujoco.yaml over algo/sac.yaml, "aligned with
# holosoma g1-29dof-wbt-fast-sac"): 2048 envs, batch 8192, 4 updates per env step, actor every
# second update, 512 replay rows per env, discount 0.99, tau 0.05, 501 atoms on -20 to 20, widths
# 512/768, alpha from 0.1 towards an entropy target of half the action size, gradients clipped at
# 10, 25,000 iterations. TD3 (no reference recipe for tracking) takes the same sizes and discount.
_TRACKING_GPU_TRAIN = dict(
    num_envs=2048,
    replay_buffer_n=512,
    batch_size=8192,
    updates_per_step=4,
    policy_frequency=2,
    learning_starts=1,
    max_iterations=25000,
    log_interval=50,
    save_interval=1000,
)
# The profiles' own run sizes on a GPU: the deployable G1WBTObs (sac/g1_wbt_obs/mujoco.yaml)
# 4096 envs and 140,000 iterations, the flips 4096 envs.
_TASK_GPU_TRAIN = {
    "G1WBTObs": dict(num_envs=4096, max_iterations=140000),
    "G1FlipTrackingSAC": dict(num_envs=4096),
    "G1WallFlipTrackingSAC": dict(num_envs=4096),
}
_TRACKING_SUPPORT = dict(gamma=0.99, tau=0.05, num_atoms=501, v_min=-20.0, v_max=20.0)
_TRACKING_ALGO = {
    "sac": dict(_TRACKING_SUPPORT, alpha_init=0.1, target_entropy_ratio=0.5, max_grad_norm=10.0),
    "td3": dict(_TRACKING_SUPPORT),
}
# On a CPU: C MuJoCo collection with the recipe's update rules at CPU sizes, but alpha from
# 0.001 (G1WalkFlat's SAC owner's), not 0.1. Measured (2-core CPU): from 0.1 the entropy bonus
# (alpha times a policy entropy of 12-18 nats) is 10-40 times the tracking reward per step
# (at most 0.13), so the critic learns the bonus: 30-64% of its target mass lay beyond the
# reference's v_max of 20, and alpha (adapted every second update at 3e-4) had only fallen to
# 0.036 after 1,000 iterations (256k env steps), with no episode to the clip's end. The GPU
# recipe's 25,000 iterations leave it room to fall (about 7,500 to reach 0.001); a CPU budget
# of tens of minutes does not. bench.reference --task G1MotionTrackingSAC runs the reference
# at its own alpha beside it.
_TRACKING_CPU_TRAIN = dict(
    physics="mujoco",
    num_envs=256,
    replay_buffer_n=512,
    batch_size=1024,
    updates_per_step=4,
    policy_frequency=2,
    learning_starts=4,
    max_iterations=60000,
    log_interval=200,
    save_interval=2000,
)
_TRACKING_CPU_ALGO = {
    name: dict(settings, actor_hidden_dim=256, critic_hidden_dim=512)
    for name, settings in _TRACKING_ALGO.items()
}
_TRACKING_CPU_ALGO["sac"]["alpha_init"] = 0.001
# The flip trackers' SAC owners (conf/offpolicy/task/sac/g1_flip_tracking/mujoco.yaml and
# g1_wall_flip_tracking) differ from G1MotionTrackingSAC's only in 4096 envs (above) and the
# entropy settings, at both scales: alpha from 0.005 towards an entropy target of 0.05 (the
# flip) or 0 (the wall flip) times the action size.
_FLIP_SAC = {
    "G1FlipTrackingSAC": dict(alpha_init=0.005, target_entropy_ratio=0.05),
    "G1WallFlipTrackingSAC": dict(alpha_init=0.005, target_entropy_ratio=0.0),
}

# The reference's in-hand rotation recipe: its HORA-SAC owner of SharpaInhandRotation
# (conf/offpolicy/task/sac/sharpa_inhand/mujoco_hora.yaml over algo/sac.yaml): C MuJoCo (MJX
# cannot run the hand), 1024 envs, batch 2048, 1280 replay rows per env, 14 updates per env
# step, actor every second update, 2 env steps per learner sync, learning rates 4.5e-4 (actor,
# critic, temperature), discount 0.97, tau 0.125, alpha from 0.01 (algo/sac.yaml's), entropy
# target 0, widths 512/768, 101 atoms on -20 to 20, 5,371 iterations; the privileged encoder
# 256-128-9 (HoraSACConfig's defaults). No observation normaliser: the reference's FastSAC has
# none (the yaml's obs_normalization is a no-op there), and the env clips observations to +-5.
# `--algo sac` takes the same settings without the encoder.
_INHAND_GPU_TRAIN = dict(
    physics="mujoco",
    num_envs=1024,
    replay_buffer_n=1280,
    batch_size=2048,
    updates_per_step=14,
    policy_frequency=2,
    env_steps_per_sync=2,
    learning_starts=1,
    max_iterations=5371,
    log_interval=50,
    save_interval=896,
)
_INHAND_SAC = dict(
    gamma=0.97, tau=0.125, actor_lr=4.5e-4, critic_lr=4.5e-4, alpha_lr=4.5e-4, alpha_init=0.01,
    target_entropy_ratio=0.0, actor_hidden_dim=512, critic_hidden_dim=768, num_atoms=101,
    v_min=-20.0, v_max=20.0, obs_normalization=False,
)  # fmt: skip
_INHAND_ALGO = {"hora_sac": _INHAND_SAC, "sac": _INHAND_SAC}
# On a CPU: the recipe's update rules at a quarter of its envs and batch, half its widths
# (256/512) and 8 updates per iteration (8 sampled rows per new env step, against the recipe's
# 14 and 4 at 4 updates), chosen beside the reference (bench/RESULTS.md, "Notes on
# learning beside the reference, SharpaInhandRotation"): in 20 minutes (0.92M env steps) it
# turned the object 2.57 rad per episode and kept it in 19% of them, where 4 updates at the
# recipe's widths (512/768) turned 1.94 rad and kept 6% at 1.02M, at about the same env steps
# per second; the reference at those widths turned 2.31 at best in 60 minutes.
_INHAND_CPU_TRAIN = dict(
    _INHAND_GPU_TRAIN, num_envs=256, batch_size=512, updates_per_step=8, max_iterations=40000,
    log_interval=100, save_interval=2000,
)  # fmt: skip
_INHAND_CPU_SAC = dict(_INHAND_SAC, actor_hidden_dim=256, critic_hidden_dim=512)
_INHAND_CPU_ALGO = {"hora_sac": _INHAND_CPU_SAC, "sac": _INHAND_CPU_SAC}

_DMC_CPU_TRAIN = dict(
    num_envs=128,
    replay_buffer_n=4096,  # 524,288 rows
    batch_size=512,
    updates_per_step=8,
    learning_starts=64,  # 8,192 rows, Brax's min replay size at these sizes
    max_iterations=4000,  # 512,000 env steps
    log_interval=25,
    save_interval=1000,
)
# TD3 explores with noise correlated over time (AR(1), rho 0.95, about 20 control steps): on
# Playground's PendulumSwingup white per-step noise never pumps enough energy to swing up (TD3
# stayed on the passive return on 4 of 4 seeds, rho 0.8 on 2 of 2); with rho 0.95 every seed
# left it (best 557-755). It costs CheetahRun (best 365 vs 427 with white noise, 4 seeds), so SAC,
# whose white noise already leaves PendulumSwingup (best 429 on average; 697 with rho 0.95) and
# does better on CheetahRun with it (447 vs 312), keeps white noise.
# bench/learning/peers.py, 414k env steps, the 2-core CPU, bench/RESULTS.md (all at discount 0.97).
# Discount 0.99, Brax's and Playground's own for these tasks (was FastTD3's 0.97): a horizon of
# about 100 control steps, 1 s on CheetahRun (10 ms steps), where 0.97's 33 steps (0.33 s) were
# too short to value a gait. bench/learning/peers.py, 414k env steps, 4 seeds, mean best evaluation
# 0.97 -> 0.99: CheetahRun SAC 447 -> 594, TD3 365 -> 564 (Brax 498); PendulumSwingup SAC
# 429 -> 635, TD3 665 -> 655 (Brax 79); CartpoleBalance stays at 998 (2 seeds).
_DMC_CPU_ALGO = {
    "sac": dict(gamma=0.99, actor_hidden_dim=256, critic_hidden_dim=256),
    "td3": dict(gamma=0.99, actor_hidden_dim=256, critic_hidden_dim=256, noise_correlation=0.95),
    # FlashSAC runs SAC's sizes (8 updates per iteration) with three changes, each measured with
    # bench/learning/peers.py at 414k env steps on the 2-core CPU (bench/RESULTS.md, notes on
    # FlashSAC):
    # - Critic width 128: its blocks expand the width 4x, so at width 256 an iteration cost 20x
    #   SAC's (1.5 s against 0.075 s); at 128 it costs about 6x (0.48 s).
    # - tau 0.1 (TD3's; SAC's is 0.125): at the paper's 0.01 the target closes its error by
    #   tau * (1 - gamma) per update, a 10,000-update time constant, and the critic barely left
    #   its initialisation in a run of this length.
    # - Rewards valued as SAC's: unscaled, on the support from the task's reward bounds, alpha
    #   0.001. PendulumSwingup's reward is out of reach of random actions
    #   (bench/learning/exploration.py);
    #   SAC finds it because a fresh critic predicts the support's middle (58.5 on [-3, 120])
    #   everywhere and the actor is drawn to what it has not tried. Scaled rewards put a fresh
    #   critic at the value of random behaviour, and FlashSAC never left the passive return
    #   (1.2). Scaled rewards on an optimistic support [-0.125, 5] swung up 1 seed of 3
    #   (unscaled: 3 of 4).
    # The optimism must first wash out where the reward is dense, which takes critic updates:
    # with 4 updates per iteration CheetahRun's seeds sat near 0 for 100-230k env steps (best
    # 417-481, below Brax's 498); with 8, its 5 seeds reached 654-741 (mean 684; the 4 seeds
    # run both ways gained 184-266 each), sooner in wall-clock too (seed 0: 521 at 754 s; the
    # 4-update seeds run alone ended at 425 and 470 after 874 and 890 s). PendulumSwingup with
    # 8: seeds 0-3 699-791, seed 4 never swung up (9.4); with 4, seed 3 never did (13.7).
    "flash_sac": dict(critic_hidden_dim=128, tau=0.1, reward_scaling=False, alpha_init=0.001),
}
_DMC_GPU_TRAIN = dict(
    num_envs=1024,
    replay_buffer_n=10240,
    batch_size=32768,
    updates_per_step=2,
    learning_starts=10,
    max_iterations=20000,
    log_interval=50,
    save_interval=2000,
)
_DMC_GPU_ALGO = {
    "sac": dict(gamma=0.97),
    "td3": dict(gamma=0.97, std_min=0.001, std_max=0.4, policy_noise=0.001),
}

# FlashSAC's recipe (arXiv 2604.04539): 1024 envs, 2 updates per step of batch 2048, its own
# networks and optimiser settings (the FlashSACConfig defaults). On an accelerator every family
# runs it; on a CPU at the family's CPU sizes (Brax's on DM Control, with fewer updates and a
# narrower critic: above).
_FLASH_GPU_TRAIN = {"flash_sac": dict(num_envs=1024, batch_size=2048, updates_per_step=2)}

_DMC_CPU = Preset(
    "dm_control",
    "cpu",
    _DMC_CPU_TRAIN,
    _DMC_CPU_ALGO,
    "Playground's Brax SAC sizes and discount 0.99, widths 256; TD3's exploration noise "
    "correlated over time (rho 0.95); FlashSAC with critic width 128, tau 0.1, and rewards "
    "valued as SAC's (no reward scaling, alpha 0.001) (measured on a 2-core CPU)",
)
_DMC_GPU = Preset(
    "dm_control",
    "gpu",
    _DMC_GPU_TRAIN,
    _DMC_GPU_ALGO,
    "FastTD3's code defaults for Playground's DM Control tasks (SAC, TD3); FlashSAC's paper recipe",
    _FLASH_GPU_TRAIN,
)


def _with_brax_discount(preset: Preset) -> Preset:
    """``preset``'s sizes with Brax's own discount, 0.99, for the ``brax`` family."""
    return Preset(
        "brax",
        preset.scale,
        preset.train,
        {k: dict(v, gamma=0.99) for k, v in preset.algo.items()},
        f"the {preset.name} sizes with Brax's discount 0.99",
        preset.algo_train,
    )


_PRESETS: dict[tuple[str, str], Preset] = {
    (p.family, p.scale): p
    for p in (
        _DMC_CPU,
        _DMC_GPU,
        _with_brax_discount(_DMC_CPU),
        _with_brax_discount(_DMC_GPU),
        Preset(
            "locomotion",
            "cpu",
            dict(
                num_envs=64,
                replay_buffer_n=1024,
                batch_size=512,
                updates_per_step=4,
                max_iterations=5000,
                log_interval=50,
                save_interval=1000,
            ),
            {
                "sac": dict(actor_hidden_dim=128, critic_hidden_dim=256),
                "td3": dict(actor_hidden_dim=128, critic_hidden_dim=256),
            },
            "batch 512, 4 updates, widths 128/256: with 256 envs TD3 walks Go1 and G1 on a "
            "2-core CPU (bench/learning/locomotion.py)",
        ),
        Preset(
            "tracking",
            "gpu",
            _TRACKING_GPU_TRAIN,
            _TRACKING_ALGO,
            "the reference's G1MotionTrackingSAC SAC owner (2048 envs, batch 8192, 4 updates, "
            "policy frequency 2, discount 0.99, tau 0.05, 501 atoms, alpha 0.1, entropy ratio "
            "0.5, gradient clip 10, 25,000 iterations)",
        ),
        Preset(
            "tracking",
            "cpu",
            _TRACKING_CPU_TRAIN,
            _TRACKING_CPU_ALGO,
            "the reference's tracking update rules (discount 0.99, tau 0.05, 501 atoms, entropy "
            "ratio 0.5, gradient clip 10, policy frequency 2) at CPU sizes: C MuJoCo "
            "collection, 256 envs, batch 1024, 4 updates, widths 256/512, alpha from 0.001 "
            "(not 0.1: its entropy bonus outweighs the tracking reward for a CPU budget)",
        ),
        Preset(
            "inhand",
            "gpu",
            _INHAND_GPU_TRAIN,
            _INHAND_ALGO,
            "the reference's SharpaInhandRotation HORA-SAC owner (C MuJoCo, 1024 envs, batch "
            "2048, 1280 replay rows per env, 14 updates, policy frequency 2, 2 env steps per "
            "sync, learning rates 4.5e-4, discount 0.97, alpha 0.01, widths 512/768, 5,371 "
            "iterations); train it with --algo hora_sac",
        ),
        Preset(
            "inhand",
            "cpu",
            _INHAND_CPU_TRAIN,
            _INHAND_CPU_ALGO,
            "the reference's SharpaInhandRotation HORA-SAC update rules at CPU sizes (256 envs, "
            "batch 512, 8 updates, widths 256/512; chosen beside the reference); train it with "
            "--algo hora_sac",
        ),
        Preset(
            "locomotion",
            "gpu",
            dict(max_iterations=50000, log_interval=50, save_interval=2000),
            {},
            "the reference's FastSAC/FastTD3 locomotion recipe (the bare defaults), 50k "
            "iterations; FlashSAC's paper recipe",
            _FLASH_GPU_TRAIN,
        ),
    )
}
FAMILIES = tuple(sorted({family for family, _ in _PRESETS}))


def family_of(env: str) -> str | None:
    """The preset family of a task name, or None when no preset covers it: a registered
    task's own (``envs.registry.task_family``), ``brax`` for Brax environments, and for
    Playground's tasks ``locomotion`` or ``dm_control`` by the task's name."""
    from unilab_jax.envs.registry import task_family

    if env.startswith("brax/"):
        return "brax"
    if env.startswith("playground/"):
        name = env.removeprefix("playground/")
        return "locomotion" if name.startswith(_PLAYGROUND_LOCOMOTION) else "dm_control"
    return task_family(env)


def task_list() -> str:
    """Every task this install can load (``playground/*`` and ``brax/*`` with the [adapters]
    extra), one a line with its preset family."""
    from unilab_jax.envs.registry import available_names

    return "\n".join(f"{n}  preset: {family_of(n) or 'none'}" for n in available_names())


def default_scale() -> str:
    """``"gpu"`` when JAX will run on a GPU or TPU, else ``"cpu"``; decided without starting
    JAX (which must not start before ``jax.distributed`` or a forced host-device count): from
    ``JAX_PLATFORMS`` when set, else from an installed accelerator plugin of jaxlib together
    with the device files of its driver (``/dev/nvidia0``, ``/dev/kfd``, ``/dev/accel0``)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if platforms:
        first = platforms.split(",")[0].strip()
        return "gpu" if first in ("cuda", "gpu", "rocm", "tpu") else "cpu"
    for plugin, device in _ACCELERATORS:
        if importlib.util.find_spec(plugin) is not None and Path(device).exists():
            return "gpu"
    return "cpu"


# (jaxlib plugin module, a device file its driver creates)
_ACCELERATORS = (
    ("jax_cuda12_plugin", "/dev/nvidia0"),
    ("jax_cuda13_plugin", "/dev/nvidia0"),
    ("jax_rocm60_plugin", "/dev/kfd"),
    ("jax_rocm7_plugin", "/dev/kfd"),
    ("libtpu", "/dev/accel0"),
)


def get_preset(env: str, scale: str = "auto") -> Preset | None:
    """The preset for ``env`` at ``scale`` (``"auto"``: by the JAX backend); None when the
    task has none or ``scale`` is ``"none"``."""
    if scale not in PRESET_CHOICES:
        raise ValueError(
            f"unknown preset scale {scale!r}; choose one of {', '.join(PRESET_CHOICES)}"
        )
    family = family_of(env)
    if scale == "none" or family is None:
        return None
    key = (family, default_scale() if scale == "auto" else scale)
    if key not in _PRESETS:  # a family without a preset: the algorithm's defaults
        return None
    preset = _PRESETS[key]
    if preset.name == "locomotion/cpu" and not env.startswith("playground/"):
        # Our robots step with C MuJoCo on a CPU (Playground's robots are JAX envs: MJX).
        preset = dataclasses.replace(
            preset,
            train={**preset.train, **_OUR_ROBOTS_CPU},
            source=f"{preset.source}; C MuJoCo collection (physics 'mujoco') with 256 envs, "
            "the recipe bench/learning/locomotion.py measured walking",
        )
        if env in _G1:
            preset = dataclasses.replace(
                preset,
                algo=_per_algo(preset.algo, _G1_CPU_ALGO),
                algo_train=_per_algo(preset.algo_train, _G1_CPU_TRAIN),
                source=f"{preset.source}; symmetry augmentation (TD3 with exploration std "
                "0.05-0.4; SAC with the reference's SAC recipe: no observation normaliser, 512 "
                "replay rows per env, value support -20 to 20) on the reference's G1, with "
                "the penalty weights its training runs at (a quarter of the declared ones)",
            )
        if env == "G1WalkRough":
            preset = dataclasses.replace(
                preset,
                algo_train=_per_algo(preset.algo_train, _G1_ROUGH_CPU_TRAIN),
                source=f"{preset.source}; on rough ground SAC samples batch 1024 and runs 8 "
                "updates per iteration (32 rows per new env step, its owner's GPU ratio)",
            )
        return preset
    if env in _FLIP_SAC:
        preset = dataclasses.replace(
            preset,
            algo=_per_algo(preset.algo, {"sac": _FLIP_SAC[env]}),
            source=f"{preset.source}; {env}'s own SAC owner: "
            + ", ".join(f"{k} {v}" for k, v in _FLIP_SAC[env].items()),
        )
    own = _TASK_GPU_TRAIN.get(env) if preset.scale == "gpu" else None
    if own:
        shown = ", ".join(f"{k}={v}" for k, v in own.items())
        preset = dataclasses.replace(
            preset,
            train={**preset.train, **own},
            source=f"{preset.source}; {env}'s own recipe: {shown}",
        )
    return preset


def _per_algo(base: dict[str, dict], extra: dict[str, dict]) -> dict[str, dict]:
    """Per-algorithm settings: ``base``'s, with ``extra``'s over them."""
    return {name: {**base.get(name, {}), **extra.get(name, {})} for name in {*base, *extra}}


def preset_configs(
    env: str,
    algo: str = "sac",
    scale: str = "auto",
    train: dict | None = None,
    algo_settings: dict | None = None,
) -> tuple[TrainConfig, dict]:
    """``(TrainConfig, algorithm settings)`` for ``env``: the preset's values, then ``train`` /
    ``algo_settings`` on top (given values always win)."""
    preset = get_preset(env, scale)
    base_train = preset.train_settings(algo) if preset else {}
    base_algo = preset.algo_settings(algo) if preset else {}
    config = TrainConfig(**{**base_train, **(train or {}), "env": env, "algo": algo})
    return config, {**base_algo, **(algo_settings or {})}


def preset_line(preset: Preset, algo: str, given: set[str] = frozenset()) -> str:
    """One line saying which preset applied and what it set (values given elsewhere win and
    are left out)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    train = preset.train_settings(algo)
    changed = {k: v for k, v in train.items() if k not in given and defaults.get(k) != v}
    changed.update({k: v for k, v in preset.algo_settings(algo).items() if k not in given})
    shown = ", ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults"
    return f"preset {preset.name}: {shown} (--preset none for the bare defaults)"
