"""The documented API behaves as the reference UniLab's (unilabsim/UniLab @ 9aa57115) does.

Written from what the reference's own tests of that API check (``tests/algos/test_offpolicy_*``,
``test_fast_td3_learner.py``, ``test_fast_sac_symmetry_contract.py``, ``test_flash_sac_learner.py``,
``tests/utils/test_experiment_tracking.py``), each behaviour the seed documents, held on our
facade: the learners' constructors (the reference's arguments, order and class defaults), the
batch contract (a missing key raises ``KeyError`` naming it), the bootstrap rule, symmetry and
``amp_dtype`` checked at construction (FastSAC's AMP run on CPU torch; FlashSAC's constructor in
``test_flash_sac_reference_api.py``), ``"flashsac"`` beside ``"flash_sac"``, the worker
helpers, ``validate_capabilities``, ``OffPolicyRuntime`` and the logger's W&B backend. What
those tests check of the reference's internals (patched module globals, private methods, its
Hydra config and scripts) is listed with the reason in ``docs/moving_from_unilab.md``.

Where a class default changed to the reference's, the core's config and presets keep ours:
``test_our_runs_take_every_value_from_the_cores_config``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import types

import pytest
import torch

from unilab.algos.torch.common.batch import CRITIC_BATCH_KEYS, MissingBatchKeyError
from unilab.algos.torch.common.networks import bootstrap_mask, categorical_projection
from unilab.algos.torch.common.updates import run_updates
from unilab.algos.torch.fast_sac import learner as fast_sac_learner
from unilab.algos.torch.fast_sac.learner import FastSACLearner, resolve_amp_dtype
from unilab.algos.torch.fast_td3.learner import FastTD3Learner, TD3Actor
from unilab.algos.torch.flash_sac.learner import FLASH_ACTOR_BATCH_KEYS, FlashSACLearner
from unilab.algos.torch.offpolicy import MultiGPUOffPolicyRunner, OffPolicyLogger
from unilab.algos.torch.offpolicy.ranks import rank_learner_kwargs
from unilab.algos.torch.offpolicy.worker import (
    resolve_collector_actor_dims,
    resolve_offpolicy_actor_priv_info,
    sample_offpolicy_actions,
)
from unilab.algos.torch.registry import build_learner, get_torch_algo
from unilab_jax.algos.hyperparams import FlashSACConfig, SACConfig, TD3Config

torch.set_num_threads(1)

# The reference's learner signatures (reference_unilab.md, transcribed from its source):
# (name, default) in order; `REQUIRED` has no default there.
REQUIRED = object()
REFERENCE_SAC = [
    ("obs_dim", REQUIRED), ("action_dim", REQUIRED), ("critic_obs_dim", REQUIRED),
    ("device", "cpu"), ("gamma", 0.97), ("tau", 0.125), ("actor_lr", 3e-4),
    ("critic_lr", 3e-4), ("alpha_lr", 3e-4), ("alpha_init", 0.001),
    ("target_entropy_ratio", 0.0), ("actor_hidden_dim", 512), ("critic_hidden_dim", 768),
    ("num_atoms", 101), ("v_min", -20.0), ("v_max", 20.0), ("num_q_networks", 2),
    ("use_layer_norm", True), ("use_tanh", True), ("log_std_max", 0.0), ("log_std_min", -5.0),
    ("weight_decay", 0.001), ("max_grad_norm", 0.0), ("use_autotune", True),
    ("use_symmetry", False), ("use_amp", False), ("amp_dtype", "auto"), ("use_compile", False),
    ("symmetry_augmentation", None), ("world_size", 1),
]  # fmt: skip
REFERENCE_TD3 = [
    ("obs_dim", REQUIRED), ("action_dim", REQUIRED), ("critic_obs_dim", REQUIRED),
    ("num_envs", 1024), ("device", "cpu"), ("gamma", 0.97), ("tau", 0.01), ("actor_lr", 3e-4),
    ("critic_lr", 3e-4), ("actor_hidden_dim", 512), ("critic_hidden_dim", 1024),
    ("num_atoms", 101), ("v_min", -10.0), ("v_max", 10.0), ("init_scale", 0.01),
    ("log_std_min", -3.0), ("log_std_max", 0.0), ("weight_decay", 0.001), ("use_cdq", True),
    ("policy_noise", 0.1), ("noise_clip", 0.2), ("policy_frequency", 2),
    ("max_iterations", 50000), ("obs_normalization", True),
]  # fmt: skip

OBS, CRITIC, ACT = 4, 5, 2
SMALL = dict(actor_hidden_dim=16, critic_hidden_dim=16, num_atoms=11)
FLASH_SMALL = dict(
    actor_hidden_dim=16, critic_hidden_dim=16, actor_num_blocks=1, critic_num_blocks=1
)


def batch(rows: int = 6, seed: int = 0, obs: int = OBS, critic: int = CRITIC, act: int = ACT):
    """A replay batch of the documented keys (``ReplayBuffer.sample``'s)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(rows, obs, generator=g),
        "critic": torch.randn(rows, critic, generator=g),
        "actions": torch.rand(rows, act, generator=g) * 2 - 1,
        "rewards": torch.randn(rows, generator=g),
        "next_obs": torch.randn(rows, obs, generator=g),
        "next_critic": torch.randn(rows, critic, generator=g),
        "dones": torch.zeros(rows),
        "truncated": torch.zeros(rows),
    }


LEARNERS = {
    "sac": lambda: FastSACLearner(OBS, ACT, CRITIC, **SMALL),
    "td3": lambda: FastTD3Learner(OBS, ACT, CRITIC, num_envs=3, obs_normalization=False, **SMALL),
    "flash_sac": lambda: FlashSACLearner(OBS, ACT, CRITIC, **FLASH_SMALL),
}


# --- constructors and class defaults ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "reference"),
    [(FastSACLearner, REFERENCE_SAC), (FastTD3Learner, REFERENCE_TD3)],
    ids=["FastSACLearner", "FastTD3Learner"],
)
def test_learner_constructor_starts_with_the_references_parameters_and_defaults(cls, reference):
    """A reference script's positional and keyword arguments mean the same here; ours follow.
    (``critic_obs_dim`` may be left out here: it then equals ``obs_dim``.)"""
    params = list(inspect.signature(cls).parameters.values())[: len(reference)]
    assert [p.name for p in params] == [name for name, _ in reference]
    for param, (name, default) in zip(params, reference, strict=True):
        if default is not REQUIRED:
            assert param.default == default, name


def test_td3_learner_takes_the_references_schedule_arguments_and_defaults():
    learner = FastTD3Learner(
        obs_dim=OBS, action_dim=ACT, critic_obs_dim=CRITIC, num_envs=4, device="cpu",
        policy_frequency=3, max_iterations=123, **SMALL,
    )  # fmt: skip
    assert (learner.policy_frequency, learner.max_iterations) == (3, 123)
    config = FastTD3Learner(OBS, ACT, CRITIC, **SMALL).config
    assert (config.tau, config.weight_decay, config.policy_noise, config.noise_clip) == (
        0.01, 0.001, 0.1, 0.2,
    )  # fmt: skip
    assert math.log(config.std_min) == pytest.approx(-3.0)
    assert math.log(config.std_max) == pytest.approx(0.0, abs=1e-12)
    assert FastTD3Learner(OBS, ACT, CRITIC, **SMALL).actor.noise_scales.shape == (1024, 1)


def test_fast_sac_has_no_observation_normaliser_by_default_as_the_reference():
    learner = FastSACLearner(OBS, ACT, CRITIC, **SMALL)
    assert not learner.config.obs_normalization
    x = torch.randn(3, OBS)
    assert torch.equal(learner.normalize_obs(x, update=True), x)


def test_our_runs_take_every_value_from_the_cores_config():
    """The facade's class defaults are the reference's; the core's configs (and the presets
    built on them) keep ours, and a learner built for one of our runs (``build_learner``:
    the "mjx" hand-over, ``load_policy``, the benches) gets every value from its config."""
    assert SACConfig().obs_normalization is True
    td3 = TD3Config()
    assert (td3.tau, td3.weight_decay, td3.policy_noise, td3.noise_clip) == (0.1, 0.1, 0.2, 0.5)
    assert math.log(td3.std_min) == pytest.approx(-1.6)
    robots_td3 = TD3Config(gamma=0.97, std_min=0.001, std_max=0.4, policy_noise=0.001)
    configs = [("sac", SACConfig()), ("td3", td3), ("td3", robots_td3)]
    for algo, config in [*configs, ("flash_sac", FlashSACConfig())]:
        built = build_learner(algo, config, OBS, CRITIC, ACT).config
        if algo == "td3":  # the exploration range goes through log-stds: exact to a rounding
            assert (built.std_min, built.std_max) == pytest.approx(
                (config.std_min, config.std_max), rel=1e-15
            )
            built = dataclasses.replace(built, std_min=config.std_min, std_max=config.std_max)
        assert built == config, algo


def test_td3_actor_takes_the_references_arguments():
    actor = TD3Actor(
        obs_dim=48, n_act=12, num_envs=4, init_scale=0.01, hidden_dim=64, log_std_min=-3.0,
        log_std_max=0.0, device=torch.device("cpu"),
    )  # fmt: skip
    obs = torch.randn(4, 48) * 100
    with torch.no_grad():
        mean = actor(obs)
    assert mean.shape == (4, 12) and mean.abs().max() <= 1.0  # tanh-bounded
    assert torch.equal(actor.explore(obs, deterministic=True), mean)
    torch.manual_seed(0)
    noisy = actor.explore(obs, deterministic=False)
    assert noisy.abs().max() <= 1.0 and not torch.allclose(noisy, mean, atol=1e-6)
    scales = actor.noise_scales.clone()
    assert torch.all((scales >= math.exp(-3.0)) & (scales <= 1.0))
    actor.explore(obs, dones=torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert torch.equal(actor.noise_scales[[1, 3]], scales[[1, 3]])
    assert not torch.equal(actor.noise_scales[[0, 2]], scales[[0, 2]])


def test_td3_learner_updates_normalises_and_checkpoints_as_the_reference():
    learner = FastTD3Learner(
        obs_dim=OBS, action_dim=ACT, critic_obs_dim=CRITIC, num_envs=4, gamma=0.97, tau=0.01,
        policy_frequency=2, obs_normalization=True, **SMALL,
    )  # fmt: skip
    data = batch()
    for step in range(4):  # the reference's hand-written loop
        critic = learner.update_critic(data)
        if step % learner.policy_frequency == 0:
            actor = learner.update_actor(data)
        learner.soft_update_target()
    assert {"qf_loss", "qf_max", "qf_min"} <= critic.keys() and "actor_loss" in actor
    obs = torch.randn(8, OBS) * 10 + 5
    assert learner.normalize_obs(obs).shape == obs.shape
    normed = learner.normalize_obs(obs, update=True)  # merges obs first, then normalises
    assert float(learner.obs_normalizer.count) == 8
    assert normed.mean().abs() < 0.1
    state = learner.get_state_dict()
    assert {"actor", "actor_target", "qnet", "qnet_target"} <= state.keys()
    learner.load_state_dict(state)
    no_cdq = FastTD3Learner(OBS, ACT, CRITIC, num_envs=2, use_cdq=False, **SMALL)
    assert "qf_loss" in no_cdq.update_critic(data) and "actor_loss" in no_cdq.update_actor(data)


def test_td3_target_update_moves_the_critic_target_only():
    learner = LEARNERS["td3"]()
    actor_target = [p.clone() for p in learner.actor_target.parameters()]
    critic_target = [p.clone() for p in learner.qnet_target.parameters()]
    with torch.no_grad():
        for p in learner.qnet.parameters():
            p.add_(1.0)
    learner.soft_update_target()
    moved = learner.qnet_target.parameters()
    assert all(not torch.equal(a, b) for a, b in zip(critic_target, moved, strict=True))
    kept = learner.actor_target.parameters()
    assert all(torch.equal(a, b) for a, b in zip(actor_target, kept, strict=True))


def test_update_schedule_updates_the_actor_every_policy_frequency_and_the_target_every_step():
    calls = []
    learner = types.SimpleNamespace(
        update_critic=lambda b: calls.append("critic") or {"qf_loss": 0.0},
        update_actor=lambda b: calls.append("actor") or {"actor_loss": 0.0},
        soft_update_target=lambda: calls.append("target"),
    )
    run_updates(learner, batch(rows=6), updates_per_step=3, policy_frequency=2, rows=2)
    assert calls.count("critic") == 3 and calls.count("target") == 3
    assert calls.count("actor") == 2  # updates 0 and 2


# --- the batch contract and the bootstrap rule --------------------------------------------------


@pytest.mark.parametrize("algo", sorted(LEARNERS))
@pytest.mark.parametrize("key", CRITIC_BATCH_KEYS)
def test_a_critic_batch_without_a_documented_key_raises_key_error_naming_it(algo, key):
    learner = LEARNERS[algo]()
    data = batch()
    del data[key]
    with pytest.raises(KeyError) as error:
        learner.update_critic(data)
    assert error.value.args == (key,)
    assert isinstance(error.value, MissingBatchKeyError) and repr(key) in str(error.value)
    assert learner.update_count == 0  # nothing was computed


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_an_actor_batch_needs_the_keys_its_loss_reads(algo):
    learner = LEARNERS[algo]()
    needed = FLASH_ACTOR_BATCH_KEYS if algo == "flash_sac" else ("obs", "critic")
    for key in needed:
        data = batch()
        del data[key]
        with pytest.raises(KeyError, match=repr(key)):
            learner.update_actor(data)
    reads = {key: value for key, value in batch().items() if key in needed}
    assert "actor_loss" in learner.update_actor(reads)


def test_time_outs_bootstrap_and_terminations_do_not():
    """``dones`` is every episode end, ``truncated`` the time-outs among them: rows 0 (going
    on) and 1 (timed out) bootstrap from the next state, row 2 (terminated) does not. The rule
    of all three learners (``bootstrap_mask``), seen in the SAC and TD3 targets."""
    dones, truncated = torch.tensor([0.0, 1.0, 1.0]), torch.tensor([0.0, 1.0, 0.0])
    torch.testing.assert_close(bootstrap_mask(dones, truncated), torch.tensor([1.0, 1.0, 0.0]))
    row = batch(rows=1)
    same = {key: value.expand(3, *value.shape[1:]).clone() for key, value in row.items()}
    same.update(dones=dones, truncated=truncated)
    for algo in ("sac", "td3"):
        learner = LEARNERS[algo]()
        _, aux = learner.compute_critic_loss(same, torch.zeros(3, ACT))
        target = aux["target_probs"][0]  # net 1's target rows [3, K]
        torch.testing.assert_close(target[1], target[0])
        support = learner.qnet.q_support
        reward_only = categorical_projection(
            target[2:], same["rewards"][2:], torch.zeros(1), learner.config.gamma,
            learner.config.v_min, learner.config.v_max, support,
        )  # fmt: skip
        torch.testing.assert_close(target[2], reward_only[0])
        assert not torch.allclose(target[2], target[0])


# --- FastSAC: symmetry, use_tanh, amp_dtype -----------------------------------------------------


class MirrorContract:
    """The reference's augmentation contract: rows, then their mirror (sign flip)."""

    batch_multiplier = 2

    def augment_obs_and_actions(self, obs, actions, *, obs_group="obs"):
        return torch.cat([obs, -obs]), torch.cat([actions, -actions])

    def mirror_obs(self, obs, *, obs_group="obs"):
        return -obs


def test_fast_sac_rejects_symmetry_without_an_augmentation_at_construction():
    with pytest.raises(
        ValueError,
        match="FastSACLearner use_symmetry=True requires a symmetry_augmentation contract",
    ):
        FastSACLearner(obs_dim=4, action_dim=2, critic_obs_dim=4, device="cpu", use_symmetry=True)


def test_fast_sac_trains_on_half_its_rows_and_their_images_under_the_references_contract():
    contract = MirrorContract()
    learner = FastSACLearner(OBS, ACT, CRITIC, use_symmetry=True, symmetry_augmentation=contract)
    assert learner.symmetry is contract and learner.mirror is None
    data = batch(rows=6)
    noise = torch.zeros(6, ACT)
    # Our semantics (the JAX core's): 6 rows in, the first 3 and their images trained on.
    images = {key: value[:3] for key, value in data.items()}
    for key in ("obs", "critic", "actions", "next_obs", "next_critic"):
        images[key] = torch.cat([images[key], -images[key]])
    for key in ("rewards", "dones", "truncated"):
        images[key] = images[key].repeat(2)
    plain = FastSACLearner(OBS, ACT, CRITIC)
    plain.qnet.load_state_dict(learner.qnet.state_dict())
    plain.qnet_target.load_state_dict(learner.qnet_target.state_dict())
    plain.actor.load_state_dict(learner.actor.state_dict())
    got = learner.update_critic(data, noise)["qf_loss"]
    assert got == pytest.approx(plain.update_critic(images, noise)["qf_loss"], rel=1e-6)


def test_fast_sac_use_tanh_and_amp_dtype_are_checked_at_construction():
    assert FastSACLearner(OBS, ACT, CRITIC, use_tanh=True, **SMALL).use_tanh
    with pytest.raises(ValueError, match=r"use_tanh=False\) is not supported: .* use_tanh=True"):
        FastSACLearner(OBS, ACT, CRITIC, use_tanh=False, **SMALL)
    assert resolve_amp_dtype("auto") is torch.bfloat16
    assert resolve_amp_dtype("BF16") is torch.bfloat16
    assert resolve_amp_dtype("fp16") is torch.float16
    with pytest.raises(ValueError, match="amp_dtype must be one of: auto, fp16, bf16"):
        FastSACLearner(OBS, ACT, CRITIC, amp_dtype="tf32", **SMALL)  # on every device


def test_fast_sac_ignores_amp_and_compile_on_a_cpu_as_the_reference():
    learner = FastSACLearner(
        OBS, ACT, CRITIC, device="cpu", use_amp=True, amp_dtype="fp16", use_compile=True, **SMALL
    )  # fmt: skip
    assert (learner.use_amp, learner.scaler, learner.use_compile) == (False, None, False)
    assert learner.amp_dtype == "fp16" and "qf_loss" in learner.update_critic(batch())


def amp_pair(monkeypatch, amp_dtype):
    """An autocast learner and a float32 one, same weights: CPU torch autocasts in fp16 and
    bf16, so the CUDA / XPU path runs here with "cpu" among the AMP devices."""
    monkeypatch.setattr(fast_sac_learner, "AMP_DEVICES", ("cpu",))
    torch.manual_seed(0)
    amp = FastSACLearner(OBS, ACT, CRITIC, use_amp=True, amp_dtype=amp_dtype, **SMALL)
    torch.manual_seed(0)
    return amp, FastSACLearner(OBS, ACT, CRITIC, **SMALL)


@pytest.mark.parametrize("amp_dtype", ["fp16", "bf16"])
def test_fast_sac_autocast_updates_follow_the_float32_ones(monkeypatch, amp_dtype):
    amp, full = amp_pair(monkeypatch, amp_dtype)
    assert amp.use_amp and (amp.scaler is not None) == (amp_dtype == "fp16")  # fp16: scaled
    noise = torch.randn(6, ACT, generator=torch.Generator().manual_seed(1))
    for step in range(3):
        data = batch(seed=step)
        got = {**amp.update_critic(data, noise), **amp.update_actor(data, noise)}
        want = {**full.update_critic(data, noise), **full.update_actor(data, noise)}
        for name in ("qf_loss", "actor_loss", "alpha"):
            assert got[name] == pytest.approx(want[name], rel=2e-2, abs=1e-3), (step, name)
        assert math.isfinite(got["critic_grad_norm"]) and got["critic_grad_norm"] > 0
    for a, b in zip(amp.qnet.parameters(), full.qnet.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=2e-2)  # the steps were taken


def test_fast_sac_fp16_skips_an_overflowing_step_and_halves_the_loss_scale(monkeypatch):
    amp, _ = amp_pair(monkeypatch, "fp16")
    amp.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)  # every scaled grad is inf
    before = [p.detach().clone() for p in amp.qnet.parameters()]
    metrics = amp.update_critic(batch())
    assert math.isfinite(metrics["qf_loss"]) and not math.isfinite(metrics["critic_grad_norm"])
    assert all(torch.equal(a, b) for a, b in zip(before, amp.qnet.parameters(), strict=True))
    assert amp.scaler.get_scale() == 2.0**99


# --- FlashSAC -----------------------------------------------------------------------------------


def test_flash_sac_learner_dims_actor_updates_and_checkpoint_on_cpu():
    learner = FlashSACLearner(obs_dim=98, action_dim=29, critic_obs_dim=101, device="cpu")
    assert (learner.obs_dim, learner.critic_obs_dim, learner.action_dim) == (98, 101, 29)
    obs = torch.randn(4, 98)
    assert learner.actor.explore(obs, deterministic=False).shape == (4, 29)
    assert learner.actor.explore(obs, deterministic=True).shape == (4, 29)
    data = batch(rows=32, obs=98, critic=101, act=29)
    critic = learner.update_critic(data)
    actor = learner.update_actor(data)
    learner.soft_update_target()
    # The reference's metric names, and ours (FastSAC's) beside them.
    assert {"critic_loss", "reward_scale_std", "qf_loss", "reward_scale"} <= critic.keys()
    assert {"actor_loss", "temperature", "alpha"} <= actor.keys()
    restored = FlashSACLearner(obs_dim=98, action_dim=29, critic_obs_dim=101, device="cpu")
    restored.load_state_dict(learner.get_state_dict())
    assert restored.get_state_dict()["update_count"] == learner.update_count == 1


def test_flash_sac_critic_update_does_not_move_the_reward_statistics():
    """Only collected steps (``observe_rewards``) move them, never a sampled batch."""
    learner = FlashSACLearner(OBS, ACT, CRITIC, num_envs=2, **FLASH_SMALL)
    learner.observe_rewards(torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2))
    before = {k: v.clone() for k, v in learner.reward_stats.state_dict().items()}
    learner.update_critic(batch())
    after = learner.reward_stats.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


# --- algo_type names, the worker helpers --------------------------------------------------------


class ExploringActor:
    def __init__(self) -> None:
        self.calls = []

    def explore(self, obs, dones=None, deterministic=False):
        self.calls.append((obs, dones, deterministic))
        return torch.ones(obs.shape[0], 3)


@pytest.mark.parametrize("algo_type", ["sac", "td3", "flashsac", "flash_sac"])
def test_sample_offpolicy_actions_explores_with_the_previous_dones(algo_type):
    actor, obs, dones = ExploringActor(), torch.zeros(4, 5), torch.zeros(4)
    actions = sample_offpolicy_actions(actor, algo_type, obs, dones)
    assert actions.shape == (4, 3) and len(actor.calls) == 1
    assert actor.calls[0][1] is dones and actor.calls[0][2] is False


def test_sample_offpolicy_actions_rejects_an_unknown_algo():
    with pytest.raises(ValueError, match="Unsupported off-policy algo_type"):
        sample_offpolicy_actions(ExploringActor(), "unknown", torch.zeros(2, 4), torch.zeros(2))


def test_flashsac_is_our_flash_sac():
    assert get_torch_algo("flashsac") is get_torch_algo("flash_sac")


def test_priv_info_is_none_for_every_algorithm_but_hora_sac():
    import numpy as np

    obs, critic = np.zeros((2, 3), np.float32), np.ones((2, 5), np.float32)
    for algo_type in ("sac", "td3", "flashsac"):
        assert (
            resolve_offpolicy_actor_priv_info(
                algo_type=algo_type, obs_np=obs, critic_np=critic, info={"critic_info": critic}
            )
            is None
        )


def test_resolve_collector_actor_dims_takes_the_references_env_contract():
    box = types.SimpleNamespace(shape=(2,))
    ints = types.SimpleNamespace(obs_groups_spec={"obs": 4, "critic": 6}, action_space=box)
    shapes = types.SimpleNamespace(obs_groups_spec={"obs": (4,), "critic": (6,)}, action_space=box)
    assert resolve_collector_actor_dims(ints) == resolve_collector_actor_dims(shapes) == (4, 2)
    assert resolve_collector_actor_dims(ints, obs_dim=7, action_dim=3) == (7, 3)
    with pytest.raises(KeyError, match="no 'obs' group"):
        resolve_collector_actor_dims(types.SimpleNamespace(obs_groups_spec={"actor": 8}))


# --- several learners ---------------------------------------------------------------------------


def test_validate_capabilities_refuses_sac_symmetry_on_several_gpus_in_the_references_words():
    with pytest.raises(
        ValueError, match="Off-policy symmetry augmentation does not support training.num_gpus > 1"
    ):
        MultiGPUOffPolicyRunner.validate_capabilities(
            algo_type="sac", learner_kwargs={"use_symmetry": True}, num_gpus=2
        )


@pytest.mark.parametrize(
    ("algo_type", "learner_kwargs", "num_gpus"),
    [
        ("sac", {"use_symmetry": False}, 2),
        ("sac", {"use_symmetry": True}, 1),
        ("td3", {"use_symmetry": True}, 2),
        ("flashsac", {}, 2),
    ],
)
def test_validate_capabilities_allows_what_the_reference_allows(
    algo_type, learner_kwargs, num_gpus
):
    MultiGPUOffPolicyRunner.validate_capabilities(
        algo_type=algo_type, learner_kwargs=learner_kwargs, num_gpus=num_gpus
    )


def test_each_rank_of_a_symmetric_td3_gets_the_parent_learners_mirror():
    """TD3 with symmetry on several learners: every rank's learner is built with the mirror
    map the parent's learner has (it could not be built without one)."""
    mirror = object()
    runner = types.SimpleNamespace(
        _learner_kwargs={"obs_dim": OBS, "use_symmetry": True},
        learner=types.SimpleNamespace(use_symmetry=True, mirror=mirror),
    )
    assert rank_learner_kwargs(runner) == {"obs_dim": OBS, "use_symmetry": True, "mirror": mirror}
    runner.learner.use_symmetry = False
    assert rank_learner_kwargs(runner) == {"obs_dim": OBS, "use_symmetry": True}


# --- the logger's W&B backend -------------------------------------------------------------------


class FakeRun:
    def __init__(self, wandb: FakeWandb) -> None:
        self.wandb, self.name, self.config = wandb, "run", {}

    def log(self, payload, step=None):
        self.wandb.logged.append((payload, step))

    def finish(self):
        self.wandb.finished += 1
        self.wandb.run = None


class FakeWandb(types.ModuleType):
    """What the logger uses of ``wandb``: ``run``, ``init`` and the run's ``log`` / ``finish``."""

    def __init__(self, existing: bool = False) -> None:
        super().__init__("wandb")
        self.inits, self.logged, self.finished = [], [], 0
        self.run = FakeRun(self) if existing else None

    def init(self, **kwargs):
        self.inits.append(kwargs)
        self.run = FakeRun(self)
        return self.run


@pytest.fixture
def wandb(monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(__import__("sys").modules, "wandb", fake)
    return fake


def wandb_logger(tmp_path, **kwargs) -> OffPolicyLogger:
    kwargs = {"algo_name": "FastSAC", "env_name": "Go2JoystickFlat", **kwargs}
    return OffPolicyLogger(log_backend="wandb", log_dir=str(tmp_path), **kwargs)


def test_logger_reuses_an_existing_wandb_run_and_leaves_it_open(monkeypatch, tmp_path):
    fake = FakeWandb(existing=True)
    monkeypatch.setitem(__import__("sys").modules, "wandb", fake)
    logger = wandb_logger(tmp_path)
    logger.finish()
    assert fake.inits == [] and fake.finished == 0


def test_logger_creates_its_wandb_run_with_the_documented_arguments_and_finishes_it_once(
    wandb, tmp_path
):
    logger = wandb_logger(
        tmp_path, obs_dim=48, action_dim=12, max_iterations=321, wandb_project="unilab",
        wandb_entity="team", wandb_name="sac-go2", wandb_group="go2", wandb_job_type="train",
        wandb_tags=["sac", "go2"], wandb_notes="notes",
    )  # fmt: skip
    (init,) = wandb.inits
    expected = dict(project="unilab", entity="team", name="sac-go2", group="go2",
                    job_type="train", tags=["sac", "go2"], notes="notes")  # fmt: skip
    assert {key: init[key] for key in expected} == expected
    config = init["config"]
    assert (config["algo"], config["env"], config["num_envs"]) == (
        "FastSAC",
        "Go2JoystickFlat",
        4096,
    )
    assert (config["obs_dim"], config["action_dim"], config["max_iterations"]) == (48, 12, 321)
    logger.close()
    logger.finish()
    assert wandb.finished == 1


def test_logger_logs_learner_timing_and_throughput_without_wait(wandb, tmp_path):
    logger = wandb_logger(tmp_path, num_envs=2)
    logger.update_collector_timing({"replay_ms": 1.25})
    logger.log_step(
        iteration=1, metrics={}, train_time=0.75, wait_time=10.0,
        learner_incremental_h2d_time=0.02, weight_sync_time=0.05,
        extra_info={"throughput_steps": 8},
    )  # fmt: skip
    payload, step = wandb.logged[-1]
    assert step == 1  # no collector steps reported yet: the iteration
    assert payload["timing/learner_wait_ms"] == 10_000.0
    assert payload["timing/learner_incremental_h2d_ms"] == pytest.approx(20.0)
    assert payload["timing/learner_train_ms"] == 750.0
    assert payload["timing/learner_weight_sync_ms"] == pytest.approx(50.0)
    assert payload["timing/collector_replay_ms"] == pytest.approx(1.25)
    assert payload["perf/iter_ms"] == pytest.approx(820.0)
    assert payload["perf/steps_per_sec"] == pytest.approx(8.0 / 0.82)
    assert not {"timing/learner_collect_ms", "perf/collect_train_ratio"} & payload.keys()
    logger.log_step(iteration=2, metrics={}, train_time=0.75, wait_time=1.0)
    assert "perf/steps_per_sec" not in wandb.logged[-1][0]  # no extra_info, no throughput
    logger.finish()


def test_logger_logs_rewards_at_the_collectors_env_steps(wandb, tmp_path):
    logger = wandb_logger(tmp_path, env_name="G1WalkFlat")
    logger.log_collector(total_steps=128, buffer_size=128)
    logger.log_step(iteration=2, metrics={}, reward=3.0, reward_metrics={"mean_ep100": 2.0})
    payload, step = wandb.logged[-1]
    assert step == 128
    assert payload["reward/mean"] == 3.0 and payload["reward/mean_ep100"] == 2.0
    assert "reward/mean_unilab_100x100" not in payload
    logger.finish()
