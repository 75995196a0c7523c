"""Symmetry augmentation in the torch learners: the JAX core's batch semantics, update for
update (parity on identical weights, batch and noise), and the facade's checks."""

import importlib.util

import jax
import numpy as np
import pytest
import test_torch_sac as sac_tests
import test_torch_td3 as td3_tests
import torch
from test_convert import compare_update, to_transition
from test_torch_sac import ACT, CRITIC, OBS, toy_batch

from unilab.algos.torch.common.symmetry import symmetric_batch
from unilab.algos.torch.convert import torch_sac_to_jax, torch_td3_to_jax
from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.offpolicy import OffPolicyRunner
from unilab_jax.algos.gradients import row_normal
from unilab_jax.algos.sac import make_sac
from unilab_jax.algos.td3 import make_td3
from unilab_jax.envs.mirror import MirrorMap, SignedPermutation, concat, signs
from unilab_jax.errors import ConfigError

torch.set_num_threads(1)  # see test_torch_sac

# A toy map of the toy sizes (obs 5, critic 6, action 3): a left/right action pair and a
# flipped entry; a flipped and a kept observation entry before the actions; one critic extra.
_ACTION = SignedPermutation((1, 0, 2), (1.0, 1.0, -1.0))
_OBS = concat(signs(-1.0, 1.0), _ACTION)
MIRROR = MirrorMap(
    obs=_OBS, critic=concat(_OBS, signs(-1.0)), action=_ACTION, qpos=_ACTION, qvel=_ACTION
)
ROWS = 16


def _trained(tests, seed=0):
    """A symmetric learner a few updates in (non-trivial weights, moments and statistics)."""
    learner = tests.make_learner(seed, use_symmetry=True, mirror=MIRROR)
    batch = toy_batch(1, dones=np.arange(ROWS) % 3 == 0, truncated=np.arange(ROWS) % 6 == 0)
    learner.update_normalizers(batch["obs"] + 1.0, batch["critic"] * 2.0)
    for _ in range(2):
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    return learner, batch


@pytest.mark.parity
@pytest.mark.parametrize("update", ["update_critic", "update_actor"])
def test_sac_symmetric_update_matches_jax(update):
    learner, batch = _trained(sac_tests)
    agent = make_sac(learner.config, OBS, CRITIC, ACT, mirror=MIRROR)
    state = torch_sac_to_jax(learner)
    key = jax.random.key(3)
    new_state, metrics = jax.jit(getattr(agent, update))(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, ROWS, ACT)))  # the augmented rows
    torch_metrics = getattr(learner, update)(batch, noise)
    fields = (
        ("critic_params", "critic_opt_state", "log_alpha", "alpha_opt_state")
        if update == "update_critic"
        else ("actor_params", "actor_opt_state")
    )
    after = torch_sac_to_jax(learner, state)
    compare_update(metrics, torch_metrics, state, new_state, after, fields)


@pytest.mark.parity
@pytest.mark.parametrize("update", ["update_critic", "update_actor"])
def test_td3_symmetric_update_matches_jax(update):
    learner, batch = _trained(td3_tests)
    agent = make_td3(learner.config, OBS, CRITIC, ACT, mirror=MIRROR)
    state = torch_td3_to_jax(learner)
    key = jax.random.key(5)
    new_state, metrics = jax.jit(getattr(agent, update))(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, ROWS, ACT)))
    torch_metrics = getattr(learner, update)(batch, noise)
    prefix = "critic" if update == "update_critic" else "actor"
    after = torch_td3_to_jax(learner, state)
    compare_update(
        metrics, torch_metrics, state, new_state, after, (f"{prefix}_params", f"{prefix}_opt_state")
    )


def test_symmetric_batch_mirrors_the_first_half_and_repeats_the_rest():
    batch = toy_batch(2, batch_size=6)
    out = symmetric_batch(MIRROR, batch)
    assert set(out) == set(batch)
    index, sign = list(_OBS.index), torch.tensor(_OBS.sign)
    torch.testing.assert_close(out["obs"][3:], batch["obs"][:3, index] * sign)
    torch.testing.assert_close(out["obs"][:3], batch["obs"][:3])
    torch.testing.assert_close(out["rewards"], batch["rewards"][:3].repeat(2))
    with pytest.raises(ValueError, match="must be a multiple of 2"):
        symmetric_batch(MIRROR, toy_batch(2, batch_size=5))


def test_symmetric_learner_needs_a_mirror_of_its_sizes_at_construction():
    """As the reference's FastSAC: use_symmetry=True without its maps fails when the learner
    is built, not at its first update (FastTD3 likewise, with the task's mirror map)."""
    with pytest.raises(ValueError, match="use_symmetry=True requires a symmetry_augmentation"):
        sac_tests.make_learner(0, use_symmetry=True)
    with pytest.raises(ValueError, match="FastTD3Learner use_symmetry=True requires mirror="):
        td3_tests.make_learner(0, use_symmetry=True)
    with pytest.raises(ValueError, match="obs maps 5 entries for size 4"):
        FastSACLearner(4, ACT, CRITIC, use_symmetry=True, mirror=MIRROR)
    with pytest.raises(ValueError, match="not both"):
        sac_tests.make_learner(0, use_symmetry=True, mirror=MIRROR, symmetry_augmentation=object())


# A map of PendulumSwingup's sizes (obs 3, critic 3, action 1): a task without a mirror map.
_PENDULUM_MIRROR = MirrorMap(
    obs=signs(1.0, -1.0, -1.0),
    critic=signs(1.0, -1.0, -1.0),
    action=signs(-1.0),
    qpos=signs(-1.0),
    qvel=signs(-1.0),
)


def test_torch_runner_refuses_symmetry_on_a_task_without_a_mirror():
    learner = FastSACLearner(
        3, 1, 3, actor_hidden_dim=16, critic_hidden_dim=16, use_symmetry=True,
        mirror=_PENDULUM_MIRROR,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="PendulumSwingup declares no mirror map"):
        OffPolicyRunner(learner, "PendulumSwingup", "sac", num_envs=2, batch_size=8)


@pytest.mark.skipif(importlib.util.find_spec("mjlab") is None, reason="needs mjlab (G1 model)")
def test_torch_runner_checks_a_symmetric_learners_mirror_against_the_task():
    from unilab_jax.envs import load

    task_mirror = load("G1WalkFlat").mirror

    def learner(mirror):
        sizes = dict(actor_hidden_dim=16, critic_hidden_dim=16)
        return FastSACLearner(98, 29, 101, use_symmetry=True, mirror=mirror, **sizes)

    runner_kwargs = dict(num_envs=2, replay_buffer_n=8, actor_hidden_dim=16)
    symmetric = learner(task_mirror)
    OffPolicyRunner(symmetric, "G1WalkFlat", "sac", batch_size=8, **runner_kwargs)
    assert symmetric.mirror == task_mirror
    with pytest.raises(ConfigError, match="batch_size a multiple of 2"):
        OffPolicyRunner(learner(task_mirror), "G1WalkFlat", "sac", batch_size=7, **runner_kwargs)
    m = task_mirror
    wrong = MirrorMap(m.obs, m.critic, m.action, m.qvel, m.qvel)
    with pytest.raises(ValueError, match="mirror map is not G1WalkFlat's"):
        OffPolicyRunner(learner(wrong), "G1WalkFlat", "sac", batch_size=8, **runner_kwargs)
