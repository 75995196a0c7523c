"""HORA-SAC on the torch facade: the learner's updates equal the JAX core's ``make_hora_sac``,
the reference's API (its runtime, worker helpers, refusals) and a tiny facade run.

The privileged values are the critic observation's columns beyond the actor's. The sizes here
(obs 5, critic 8: 3 privileged values; encoder 16-6 and a projection to 4) keep every piece of
the actor in play, the projection included.
"""

from __future__ import annotations

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from test_convert import (
    assert_torch_states_equal,
    compare_update,
    max_rel_err,
    poisoned,
    to_transition,
    torch_state,
    trees_equal,
)
from test_torch_sac import normal, randomize

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.hora.sac import HoraSACRuntime, resolve_hora_sac_runtime
from unilab.algos.torch.hora.sac_learner import HoraSACLearner
from unilab.algos.torch.hora.sac_models import HoraSACActor
from unilab.algos.torch.offpolicy import OffPolicyRunner
from unilab.algos.torch.offpolicy.checkpoints import checkpoint_meta
from unilab.algos.torch.offpolicy.collector_actor import actor_input_statistics, actor_inputs
from unilab.algos.torch.offpolicy.runtime import (
    OffPolicyRuntime,
    resolve_custom_offpolicy_runtime,
)
from unilab.algos.torch.offpolicy.worker import (
    resolve_offpolicy_actor_priv_info,
    sample_offpolicy_actions,
)
from unilab.algos.torch.registry import (
    actor_kwargs_from_learner,
    build_actor,
    build_learner,
    get_torch_algo,
    spec_of_learner,
)
from unilab_jax.algos.agent import actor_observation
from unilab_jax.algos.gradients import row_normal
from unilab_jax.algos.hyperparams import HoraSACConfig
from unilab_jax.algos.sac import make_hora_sac
from unilab_jax.config import TrainConfig
from unilab_jax.policy import load_policy
from unilab_jax.torch.actors import PrivilegedSACActor

pytestmark = pytest.mark.timeout(600)
torch.set_num_threads(1)  # see test_torch_sac

OBS, CRITIC, ACT = 5, 8, 3
PRIV = CRITIC - OBS
CONFIG = HoraSACConfig(
    actor_hidden_dim=32, critic_hidden_dim=32, num_atoms=11, v_min=-5.0, v_max=5.0,
    actor_lr=1e-3, critic_lr=1e-3, priv_embed_dim=4, priv_hidden_dims=(16, 6),
)  # fmt: skip
RESOLVER = "unilab.algos.torch.hora.sac:resolve_hora_sac_runtime"


def make_learner(seed: int = 0, config: HoraSACConfig = CONFIG) -> HoraSACLearner:
    """A learner with exactly ``config``'s values (the core's: observation normaliser on)."""
    torch.manual_seed(seed)
    return build_learner("hora_sac", config, OBS, CRITIC, ACT)


def hora_batch(seed: int, rows: int = 16) -> dict[str, torch.Tensor]:
    """A reference-format batch whose privileged columns have their own scale and offset (so
    normalising them with the actor's statistics instead of the critic's would show)."""
    rng = np.random.default_rng(seed)
    critic = rng.normal(size=(2, rows, CRITIC))
    critic[..., OBS:] = 3.0 * critic[..., OBS:] + 2.0
    fields = dict(
        obs=rng.normal(size=(rows, OBS)),
        next_obs=rng.normal(size=(rows, OBS)),
        critic=critic[0],
        next_critic=critic[1],
        actions=rng.uniform(-1.0, 1.0, size=(rows, ACT)),
        rewards=rng.normal(size=rows),
        dones=np.arange(rows) % 3 == 0,
        truncated=np.arange(rows) % 6 == 0,
    )
    return {k: torch.as_tensor(np.asarray(v), dtype=torch.float32) for k, v in fields.items()}


def trained(seed: int = 0, steps: int = 2) -> tuple[HoraSACLearner, dict]:
    """A learner with random weights everywhere (no zero heads: the encoder gets gradients),
    fed statistics and ``steps`` updates (non-empty optimiser moments)."""
    learner = make_learner(seed)
    for module in (learner.actor, learner.qnet):
        randomize(module, seed + 3, 0.3)
    batch = hora_batch(1)
    learner.update_normalizers(batch["obs"] + 1.0, batch["critic"] * 2.0 - 1.0)
    for _ in range(steps):
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    return learner, batch


@functools.cache
def core_agent(config: HoraSACConfig = CONFIG):
    return make_hora_sac(config, OBS, CRITIC, ACT)


@functools.cache
def jitted(name: str):
    """The core agent's compiled function ``name``, shared by the tests."""
    return jax.jit(getattr(core_agent(), name))


def to_jax(learner, state=None):
    return get_torch_algo("hora_sac").torch_to_jax(learner, state)


def to_torch(state, learner) -> None:
    get_torch_algo("hora_sac").jax_to_torch(state, learner)


# --- (a) the learner is the core's make_hora_sac --------------------------------------------------


def test_the_conversion_covers_every_leaf_and_round_trips_bit_exactly():
    learner, _ = trained()
    assert isinstance(learner.config, HoraSACConfig) and learner.priv_info_dim == PRIV
    assert isinstance(learner.actor, PrivilegedSACActor)
    assert {"priv_encoder.0.weight", "priv_encoder.4.weight", "priv_projection.weight"} <= set(
        learner.actor.state_dict()
    )
    state = to_jax(learner)
    assert "priv_encoder" in state.actor_params["params"]
    assert "priv_projection" in state.actor_params["params"]
    assert trees_equal(to_jax(learner, poisoned(state)), state)  # every leaf written
    other = make_learner(seed=7)
    to_torch(state, other)
    assert_torch_states_equal(torch_state(other), torch_state(learner))
    assert trees_equal(to_jax(other, core_agent().init(jax.random.key(9))), state)


def test_the_converted_actor_acts_as_the_cores_on_its_privileged_input():
    learner, _ = trained()
    state = to_jax(learner)
    obs, critic = normal(1, (32, OBS)), 3.0 * normal(2, (32, CRITIC)) + 1.0
    with torch.no_grad():
        want = learner.actor.deterministic(learner.actor_input(obs, critic))
    groups = {"obs": jnp.asarray(obs.numpy()), "critic": jnp.asarray(critic.numpy())}
    got = jitted("act")(state, actor_observation(core_agent(), groups))
    assert max_rel_err(got, want.numpy()) <= 1e-5


@pytest.mark.parity
def test_one_critic_and_temperature_update_equals_the_cores():
    learner, batch = trained()
    state = to_jax(learner)
    key = jax.random.key(3)
    new_state, metrics = jitted("update_critic")(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, 16, ACT)))
    torch_metrics = learner.update_critic(batch, noise)
    fields = ("critic_params", "critic_opt_state", "log_alpha", "alpha_opt_state")
    compare_update(metrics, torch_metrics, state, new_state, to_jax(learner, state), fields)


@pytest.mark.parity
def test_one_actor_update_equals_the_cores():
    learner, batch = trained()
    state = to_jax(learner)
    key = jax.random.key(4)
    new_state, metrics = jitted("update_actor")(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, 16, ACT)))
    torch_metrics = learner.update_actor(batch, noise)
    after = to_jax(learner, state)
    compare_update(
        metrics, torch_metrics, state, new_state, after, ("actor_params", "actor_opt_state")
    )
    # The step moved the privileged encoder too (it is part of what was compared).
    before = state.actor_params["params"]["priv_encoder"]["dense_0"]["kernel"]
    assert not np.array_equal(after.actor_params["params"]["priv_encoder"]["dense_0"]["kernel"],
                              before)  # fmt: skip


def test_the_collector_normalises_the_actor_input_as_the_learner():
    learner, _ = trained()
    obs = (normal(5, (6, OBS)) * 2.0).numpy()
    critic = (normal(6, (6, CRITIC)) * 3.0 + 1.0).numpy()
    published = tuple(t.numpy() for t in actor_input_statistics(learner))
    assert published[0].shape == (CRITIC,)  # the actor's input: obs and the privileged values
    stats = types.SimpleNamespace(get=lambda: published)  # SharedObsNormStats's reading side
    policy_obs, priv = actor_inputs("hora_sac", obs, critic, {}, stats)
    want = learner.actor_input(torch.from_numpy(obs), torch.from_numpy(critic))
    torch.testing.assert_close(torch.cat([policy_obs, priv], dim=-1), want, rtol=0, atol=1e-6)
    assert actor_inputs("sac", obs, critic, {}, None)[1] is None


# --- (b) the reference's API ----------------------------------------------------------------------


class _DummyHoraActor:
    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, torch.Tensor, bool]] = []

    def explore(self, obs, priv_info, deterministic=False):
        self.calls.append((obs.clone(), priv_info.clone(), deterministic))
        return torch.ones(obs.shape[0], 3, dtype=obs.dtype)


def test_sample_offpolicy_actions_passes_hora_priv_info():
    actor, obs, priv_info = _DummyHoraActor(), torch.zeros(4, 5), torch.randn(4, 2)
    actions = sample_offpolicy_actions(
        actor=actor, algo_type="hora_sac", obs_torch=obs, prev_dones_torch=torch.zeros(4),
        priv_info_torch=priv_info,
    )  # fmt: skip
    assert actions.shape == (4, 3) and len(actor.calls) == 1
    torch.testing.assert_close(actor.calls[0][1], priv_info)
    assert actor.calls[0][2] is False
    with pytest.raises(ValueError, match="requires priv_info_torch"):
        sample_offpolicy_actions(_DummyHoraActor(), "hora_sac", obs, torch.zeros(4))


def test_hora_exploration_restarts_a_correlated_draw_where_an_episode_ended():
    torch.manual_seed(0)
    actor = PrivilegedSACActor(OBS, ACT, PRIV, hidden_dim=32, noise_correlation=0.9)
    obs, priv = normal(1, (4, OBS)), normal(2, (4, PRIV))
    sample_offpolicy_actions(actor, "hora_sac", obs, torch.zeros(4), priv)
    torch.manual_seed(3)
    sample_offpolicy_actions(actor, "hora_sac", obs, torch.ones(4), priv)  # every episode ended
    torch.manual_seed(3)
    assert torch.equal(actor.noise, torch.randn(4, ACT))  # a fresh draw, not a carried one


def test_resolve_offpolicy_actor_priv_info_prefers_explicit_info_then_the_critic_tail():
    obs = np.zeros((2, 3), np.float32)
    tail = np.arange(4, dtype=np.float32).reshape(2, 2)
    critic = np.concatenate([obs, tail], axis=1)
    explicit = np.full((2, 2), 7.0, np.float32)

    def resolve(algo_type="hora_sac", critic_np=critic, info=None):
        return resolve_offpolicy_actor_priv_info(
            algo_type=algo_type, obs_np=obs, critic_np=critic_np, info={} if info is None else info
        )

    np.testing.assert_array_equal(resolve(info={"critic_info": explicit}), explicit)
    np.testing.assert_array_equal(resolve(), tail)
    # An info entry of other rows is not the actor's context: the tail is.
    np.testing.assert_array_equal(resolve(info={"critic_info": np.ones((3, 2))}), tail)
    with pytest.raises(ValueError, match="critic observation tail"):
        resolve(critic_np=obs)
    for algo_type in ("sac", "td3", "flashsac"):
        assert resolve(algo_type, info={"critic_info": explicit}) is None


def test_the_runtime_builds_the_privileged_actors_kwargs_as_the_reference():
    assert OffPolicyRuntime().build_model_kwargs(obs_dim=4, critic_obs_dim=6) == {}
    section = {
        "runtime_impl": "hora_sac",
        "actor": {"priv_info_embed_dim": 7, "priv_mlp_hidden_dims": [16, 7]},
    }
    runtime = resolve_hora_sac_runtime(section)
    assert isinstance(runtime, HoraSACRuntime) and isinstance(runtime, OffPolicyRuntime)
    assert runtime.learner_cls is HoraSACLearner
    assert runtime.algo_type == "hora_sac" and runtime.supports_symmetry is False
    assert runtime.build_model_kwargs(obs_dim=5, critic_obs_dim=8) == {
        "priv_info_dim": 3,
        "priv_info_embed_dim": 7,
        "priv_mlp_hidden_dims": (16, 7),
    }
    defaults = resolve_hora_sac_runtime({"runtime_impl": "hora_sac"})
    assert defaults.build_model_kwargs(obs_dim=5, critic_obs_dim=6) == {
        "priv_info_dim": 1, "priv_info_embed_dim": 9, "priv_mlp_hidden_dims": (256, 128, 9),
    }  # fmt: skip
    with pytest.raises(ValueError, match="privileged tail"):
        defaults.build_model_kwargs(obs_dim=5, critic_obs_dim=5)
    assert resolve_hora_sac_runtime({"runtime_impl": "other"}) is None
    assert resolve_hora_sac_runtime({}) is None
    # Through the config hook: the algo section, or a whole config with one.
    hooked = resolve_custom_offpolicy_runtime({**section, "runtime_resolver": RESOLVER})
    assert hooked == runtime
    whole = {"algo": {**section, "runtime_resolver": RESOLVER}}
    assert resolve_custom_offpolicy_runtime(whole) == runtime
    with pytest.raises(ValueError, match="runtime_impl='hora_sac'.*runtime_resolver"):
        resolve_custom_offpolicy_runtime({"runtime_impl": "hora_sac"})


def test_the_learner_refuses_symmetry_and_a_missing_privileged_tail():
    sizes = dict(
        obs_dim=OBS, critic_obs_dim=CRITIC, action_dim=ACT, actor_hidden_dim=32,
        critic_hidden_dim=32, priv_mlp_hidden_dims=(8,), priv_info_embed_dim=8,
    )  # fmt: skip
    with pytest.raises(ValueError, match="does not support symmetry"):
        HoraSACLearner(**sizes, priv_info_dim=PRIV, use_symmetry=True)
    with pytest.raises(ValueError, match="does not support symmetry"):
        HoraSACLearner(**sizes, priv_info_dim=PRIV, symmetry_augmentation=object())
    with pytest.raises(ValueError, match="positive priv_info_dim, got 0"):
        HoraSACLearner(**sizes, priv_info_dim=0)
    with pytest.raises(ValueError, match="positive priv_info_dim"):
        HoraSACLearner(**{**sizes, "critic_obs_dim": OBS})
    with pytest.raises(ValueError, match="critic_obs_dim - obs_dim = 3"):
        HoraSACLearner(**sizes, priv_info_dim=2)
    learner = HoraSACLearner(**sizes, priv_info_dim=PRIV)  # no projection: 8 == 8
    assert not learner.config.obs_normalization  # the reference's class default: none
    assert learner.config.priv_hidden_dims == (8,) and learner.config.priv_embed_dim == 8
    assert "priv_projection.weight" not in learner.actor.state_dict()
    optimised = learner.actor_optimizer.param_groups[0]["params"]
    assert [id(p) for p in optimised] == [id(p) for p in learner.actor.parameters()]


def test_the_actor_takes_the_references_calls_and_the_joined_input():
    torch.manual_seed(0)
    actor = HoraSACActor(OBS, PRIV, ACT, hidden_dim=32, priv_info_embed_dim=4,
                         priv_mlp_hidden_dims=(16, 6))  # fmt: skip
    assert isinstance(actor, PrivilegedSACActor)
    randomize(actor, 2, 0.3)
    obs, priv = normal(1, (6, OBS)), normal(2, (6, PRIV))
    joined = torch.cat([obs, priv], dim=-1)
    with torch.no_grad():
        action, mean, log_std = actor(obs, priv)
        torch.testing.assert_close(actor(joined)[1], mean, rtol=0, atol=0)
        torch.testing.assert_close(actor.deterministic(obs, priv), action, rtol=0, atol=0)
        z = actor.encode_privileged_info(priv)
        assert z.shape == (6, 4) and torch.all(z.abs() <= 1)
    for call in (lambda: actor.explore(obs, priv, deterministic=False),
                 lambda: actor.explore(joined, deterministic=False)):  # fmt: skip
        torch.manual_seed(5)
        sampled = call()
        torch.manual_seed(5)
        torch.testing.assert_close(sampled, actor.get_actions_and_log_probs(obs, priv)[0])
    torch.testing.assert_close(actor.explore(obs, priv, deterministic=True), action)
    assert torch.equal(actor.explore(joined, True), action)
    with pytest.raises(ValueError, match="needs priv_info"):
        actor.explore(obs)
    with pytest.raises(ValueError, match="use_tanh=False"):
        HoraSACActor(OBS, PRIV, ACT, use_tanh=False)


def test_the_registry_builds_the_collectors_actor_and_names_the_algorithm():
    learner = make_learner()
    assert spec_of_learner(learner) is get_torch_algo("hora_sac")
    kwargs = actor_kwargs_from_learner(learner)
    assert (kwargs["priv_dim"], kwargs["priv_embed_dim"], kwargs["priv_hidden_dims"]) == (
        PRIV, 4, (16, 6),
    )  # fmt: skip
    ours = build_actor("hora_sac", OBS, ACT, 32, True, "cpu", 1, **kwargs)
    runtime = resolve_hora_sac_runtime(
        {"runtime_impl": "hora_sac", "actor": {"priv_info_embed_dim": 4,
                                               "priv_mlp_hidden_dims": (16, 6)}}
    )  # fmt: skip
    model_kwargs = runtime.build_model_kwargs(obs_dim=OBS, critic_obs_dim=CRITIC)
    theirs = build_actor("hora_sac", OBS, ACT, 32, True, "cpu", 1, **model_kwargs)
    shapes = {k: v.shape for k, v in learner.actor.state_dict().items()}
    for actor in (ours, theirs):
        assert {k: v.shape for k, v in actor.state_dict().items()} == shapes
    with pytest.raises(ValueError, match="requires priv_info_dim"):
        build_actor("hora_sac", OBS, ACT, 32, True, "cpu", 1)
    meta = checkpoint_meta(learner, TrainConfig(env="CartpoleBalance", algo="sac"), "mujoco")
    assert meta["algo"] == "hora_sac" and meta["config"]["algo"]["priv_embed_dim"] == 4


def test_the_runner_takes_a_hora_learner_under_sac_and_refuses_a_mismatch():
    sizes = dict(obs_dim=5, critic_obs_dim=6, action_dim=1, actor_hidden_dim=32,
                 critic_hidden_dim=32)  # fmt: skip
    hora = HoraSACLearner(**sizes)
    runner = OffPolicyRunner(hora, "CartpoleBalance", "sac", actor_hidden_dim=32,
                             sim_backend="mjx", num_envs=8, batch_size=32)  # fmt: skip
    assert runner.algo_type == "hora_sac" and runner.config.algo == "hora_sac"
    plain = FastSACLearner(5, 1, 6, actor_hidden_dim=32, critic_hidden_dim=32)
    with pytest.raises(ValueError, match="algo_type 'hora_sac' trains a HoraSACLearner"):
        OffPolicyRunner(plain, "CartpoleBalance", "hora_sac", sim_backend="mjx")


# --- (c) a facade run ---------------------------------------------------------------------------


def test_a_tiny_facade_run_with_the_hora_runtime_trains_and_saves(tmp_path):
    """The reference script's path: the algo config selects the runtime, whose learner class
    and model kwargs build the learner and the collector's actor; the runner gets the script's
    ``algo_type="sac"``. CartpoleBalance: obs 5, critic 6 (one privileged value)."""
    section = {"runtime_impl": "hora_sac", "runtime_resolver": RESOLVER,
               "actor": {"priv_info_embed_dim": 4, "priv_mlp_hidden_dims": [8, 4]}}  # fmt: skip
    runtime = resolve_custom_offpolicy_runtime(section)
    model_kwargs = runtime.build_model_kwargs(obs_dim=5, critic_obs_dim=6)
    torch.manual_seed(0)
    learner = runtime.learner_cls(
        obs_dim=5, critic_obs_dim=6, action_dim=1, actor_hidden_dim=32, critic_hidden_dim=32,
        v_min=-1.0, v_max=40.0, obs_normalization=True, **model_kwargs,
    )  # fmt: skip
    before = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    runner = OffPolicyRunner(
        learner, "CartpoleBalance", "sac", num_envs=8, replay_buffer_n=32, batch_size=32,
        updates_per_step=2, policy_frequency=1, actor_hidden_dim=32, seed=0,
        obs_normalization=True, actor_kwargs=model_kwargs,
    )  # fmt: skip
    assert runner.algo_type == "hora_sac"
    runner.learn(max_iterations=3, save_interval=0, log_dir=str(tmp_path), logger_type="no_print")
    assert runner.last_run_summary["status"] == "completed"
    assert runner.last_run_summary["completed_iterations"] == 3
    assert learner.update_count == 3 * 2
    after = learner.actor.state_dict()
    assert not torch.equal(after["priv_encoder.0.weight"], before["priv_encoder.0.weight"])
    saved = torch.load(tmp_path / "model_3.pt", weights_only=False)
    assert saved["unilab_meta"]["algo"] == "hora_sac"
    fresh = HoraSACLearner(
        obs_dim=5, critic_obs_dim=6, action_dim=1, actor_hidden_dim=32, critic_hidden_dim=32,
        obs_normalization=True, **model_kwargs,
    )  # fmt: skip
    fresh.load_state_dict(saved)
    for name, value in learner.actor.state_dict().items():
        assert torch.equal(fresh.actor.state_dict()[name], value), name
    # The core reads the run (load_policy): its policy acts on [obs | privileged values] as the
    # learner's deterministic actor does.
    policy = load_policy(tmp_path)
    assert (policy.algo, policy.input_dim) == ("hora_sac", 6)
    obs, critic = normal(1, (4, 5)), normal(2, (4, 6)) * 2.0 + 1.0
    with torch.no_grad():
        want = learner.actor.deterministic(learner.actor_input(obs, critic))
    got = policy(torch.cat([obs, critic[:, 5:]], dim=-1).numpy())
    assert max_rel_err(got, want.numpy()) <= 1e-5


def test_the_facade_trains_sharpa_on_c_mujoco_and_refuses_mjx_naming_why(tmp_path):
    """The reference's one HORA-SAC task runs on C MuJoCo only: the torch loop
    (``sim_backend="mujoco"``) trains it (its run config says so); ``"mjx"`` is refused in one
    line naming the reason before anything compiles. Caches: 2 grasps at the default pose."""
    from unilab_jax.config import ConfigError

    row = np.zeros(29, np.float32)
    row[22:26] = (-0.09559, -0.00517, 0.61906, 1.0)  # the object at home, upright
    np.save(tmp_path / "g_1.npy", np.repeat(row[None], 2, axis=0))
    override = {"grasp_cache_path": str(tmp_path / "g"), "scale_list": (1.0,)}
    learner = HoraSACLearner(obs_dim=147, critic_obs_dim=156, action_dim=22,
                             actor_hidden_dim=32, critic_hidden_dim=32)  # fmt: skip
    sizes = dict(num_envs=2, replay_buffer_n=8, batch_size=16, learning_starts=1,
                 updates_per_step=1, actor_hidden_dim=32, seed=0,
                 env_cfg_override=override)  # fmt: skip
    with pytest.raises(ConfigError, match="runs on C MuJoCo only: MJX refuses its contact"):
        OffPolicyRunner(learner, "SharpaInhandRotation", "sac", sim_backend="mjx", **sizes)
    runner = OffPolicyRunner(learner, "SharpaInhandRotation", "sac", sim_backend="mujoco",
                             **sizes)  # fmt: skip
    assert (runner.algo_type, runner.config.physics) == ("hora_sac", "mujoco")
    runner.learn(max_iterations=2, save_interval=0, log_dir=str(tmp_path / "run"),
                 logger_type="no_print")  # fmt: skip
    assert runner.last_run_summary["completed_iterations"] == 2
    assert learner.update_count == 2


def test_mjx_trains_the_cores_hora_sac_and_writes_the_state_back(tmp_path):
    """``sim_backend="mjx"``: the runner hands the learner to the core's ``"hora_sac"`` (a
    privileged actor acting on ``actor_observation``) and writes the trained state back."""
    torch.manual_seed(0)
    learner = HoraSACLearner(
        obs_dim=5, critic_obs_dim=6, action_dim=1, actor_hidden_dim=32, critic_hidden_dim=32,
        priv_info_embed_dim=4, priv_mlp_hidden_dims=(8, 4), v_min=-1.0, v_max=40.0,
        obs_normalization=True,
    )  # fmt: skip
    before = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    runner = OffPolicyRunner(
        learner, "CartpoleBalance", "sac", num_envs=8, replay_buffer_n=32, batch_size=32,
        updates_per_step=2, policy_frequency=1, actor_hidden_dim=32, seed=0, sim_backend="mjx",
    )  # fmt: skip
    runner.learn(max_iterations=5, save_interval=0, log_dir=str(tmp_path), logger_type="no_print")
    summary = runner.last_run_summary
    assert (summary["status"], summary["backend"]) == ("completed", "mjx")
    assert learner.update_count == 2 * 2  # learning from iteration 4 (32 rows of 8 envs)
    after = learner.actor.state_dict()
    assert not torch.equal(after["priv_encoder.0.weight"], before["priv_encoder.0.weight"])
    assert all(torch.isfinite(v).all() for v in after.values())
    meta = torch.load(tmp_path / "model_5.pt", weights_only=False)["unilab_meta"]
    assert (meta["algo"], meta["sim_backend"]) == ("hora_sac", "mjx")
