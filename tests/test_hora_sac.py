"""HORA-SAC in the core (``unilab_jax.algos.sac.make_hora_sac``): FastSAC whose actor also reads
the critic observation's privileged tail. Its actor's layout, what it reads (and what it does
not), the normalisation it acts and learns with, an update reaching the encoder, the refusals,
the torch actor's equality with the JAX one, and a short C MuJoCo run on SharpaInhandRotation
through evaluation, a checkpoint, ``load_policy``, ``evaluate`` and the export refusal. The
update's parity with the reference's learner is ``tests/test_reference_learners.py``'s."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.algos.agent import Transition, actor_observation
from unilab_jax.algos.common import prepare_batch
from unilab_jax.algos.hyperparams import HoraSACConfig, SACConfig
from unilab_jax.algos.registry import get_algo
from unilab_jax.algos.sac import make_hora_sac, make_sac_networks, sample_tanh_gaussian
from unilab_jax.errors import ConfigError

OBS, CRITIC, ACT = 6, 9, 2
CONFIG = HoraSACConfig(
    actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11, priv_hidden_dims=(8, 4),
    priv_embed_dim=4, obs_normalization=True,
)  # fmt: skip


def _perturbed(tree, key, scale=0.3):
    """Every leaf moved by seeded noise (the heads start at zero: an untrained actor's action
    reads nothing)."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    pairs = zip(leaves, keys, strict=True)
    moved = [x + scale * jax.random.normal(k, x.shape, x.dtype) for x, k in pairs]
    return jax.tree.unflatten(treedef, moved)


@pytest.fixture(scope="module")
def agent_and_state():
    agent = make_hora_sac(CONFIG, OBS, CRITIC, ACT)
    state = agent.init(jax.random.PRNGKey(0))
    state = state.replace(actor_params=_perturbed(state.actor_params, jax.random.PRNGKey(1)))
    rng = np.random.default_rng(0)
    rows = {
        "obs": rng.normal(1.0, 2.0, (64, OBS)).astype(np.float32),
        "critic": rng.normal(-1.0, 3.0, (64, CRITIC)).astype(np.float32),
    }
    state = agent.update_normalizers(state, jnp.asarray(rows["obs"]), jnp.asarray(rows["critic"]))
    return agent, state


def _batch(rng: np.random.Generator, rows: int = 32) -> Transition:
    f = lambda *shape: jnp.asarray(rng.normal(size=(rows, *shape)).astype(np.float32))  # noqa: E731
    return Transition(
        obs=f(OBS), critic=f(CRITIC), actions=jnp.tanh(f(ACT)), rewards=f(),
        next_obs=f(OBS), next_critic=f(CRITIC), terminated=jnp.zeros(rows),
        truncated=jnp.zeros(rows),
    )  # fmt: skip


def test_the_actor_encodes_the_privileged_tail_beside_the_observation(agent_and_state):
    agent, state = agent_and_state
    assert agent.privileged_dim == CRITIC - OBS
    params = state.actor_params["params"]
    encoder = params["priv_encoder"]
    assert encoder["dense_0"]["kernel"].shape == (CRITIC - OBS, 8)
    assert encoder["dense_1"]["kernel"].shape == (8, 4)
    assert set(encoder) == {"dense_0", "norm_0", "dense_1", "norm_1"}
    assert "priv_projection" not in params  # the last width is the embedding's
    assert params["trunk"]["dense_0"]["kernel"].shape == (OBS + 4, 16)
    projected = make_hora_sac(
        HoraSACConfig(actor_hidden_dim=16, priv_hidden_dims=(8, 5), priv_embed_dim=4), OBS,
        CRITIC, ACT,
    ).init(jax.random.PRNGKey(0))  # fmt: skip
    assert projected.actor_params["params"]["priv_projection"]["kernel"].shape == (5, 4)


def test_acting_reads_the_observation_and_the_critic_tail_only(agent_and_state):
    agent, state = agent_and_state
    rng = np.random.default_rng(1)
    obs = {
        "obs": rng.normal(size=(5, OBS)).astype(np.float32),
        "critic": rng.normal(size=(5, CRITIC)).astype(np.float32),
    }
    seen = actor_observation(agent, obs)
    np.testing.assert_array_equal(seen, np.concatenate([obs["obs"], obs["critic"][:, OBS:]], 1))
    act = jax.jit(agent.act)
    base = np.asarray(act(state, seen))
    head = dict(obs, critic=obs["critic"].copy())
    head["critic"][:, :OBS] += 5.0  # the critic's own copy of the observation: not read
    np.testing.assert_array_equal(act(state, actor_observation(agent, head)), base)
    tail = dict(obs, critic=obs["critic"].copy())
    tail["critic"][:, OBS:] += 1.0  # the privileged values: read
    assert np.abs(np.asarray(act(state, actor_observation(agent, tail))) - base).min() > 1e-4
    # A plain agent reads the observation group alone.
    plain = get_algo("sac").make_agent(SACConfig(actor_hidden_dim=16), OBS, CRITIC, ACT)
    assert plain.privileged_dim == 0 and actor_observation(plain, obs) is obs["obs"]


def test_acting_normalises_as_the_update_does(agent_and_state):
    """The action from raw ``[obs | tail]`` equals the actor on the update's prepared rows: the
    observation by the actor's statistics, the tail by the critic's statistics of its
    columns."""
    agent, state = agent_and_state
    batch = _batch(np.random.default_rng(2), 8)
    prepared = prepare_batch(state, batch, lambda b: b, True, agent.privileged_dim)
    actor = make_sac_networks(CONFIG, ACT, OBS).actor
    want = jnp.tanh(actor.apply(state.actor_params, prepared.obs)[0])
    raw = actor_observation(agent, {"obs": batch.obs, "critic": batch.critic})
    np.testing.assert_allclose(agent.act(state, raw), want, rtol=1e-6, atol=1e-6)
    # The tail really is normalised with the critic's statistics (they are far from 0 / 1).
    assert abs(float(state.critic_normalizer.mean[OBS:].mean()) + 1.0) < 0.5
    no_norm = jnp.tanh(actor.apply(state.actor_params, raw)[0])
    assert float(jnp.abs(no_norm - want).max()) > 1e-3


def test_an_update_trains_the_encoder(agent_and_state):
    agent, state = agent_and_state
    batch = _batch(np.random.default_rng(3))
    key = jax.random.PRNGKey(4)
    state2, critic_metrics = jax.jit(agent.update_critic)(state, batch, key)
    state2, actor_metrics = jax.jit(agent.update_actor)(state2, batch, key)
    for value in {**critic_metrics, **actor_metrics}.values():
        assert np.all(np.isfinite(value))
    before = state.actor_params["params"]["priv_encoder"]["dense_0"]["kernel"]
    after = state2.actor_params["params"]["priv_encoder"]["dense_0"]["kernel"]
    assert float(jnp.abs(after - before).max()) > 1e-6
    # The next action of the critic's target reads the next critic row's tail.
    moved = batch.replace(next_critic=batch.next_critic.at[:, OBS:].add(3.0))
    _, other = jax.jit(agent.update_critic)(state, moved, key)
    assert float(other["qf_loss"]) != float(critic_metrics["qf_loss"])


def test_settings_that_cannot_work_are_refused_before_anything_is_built():
    with pytest.raises(ConfigError, match="use_symmetry is True.*HORA-SAC"):
        HoraSACConfig(use_symmetry=True).validate()
    with pytest.raises(ConfigError, match="priv_hidden_dims"):
        HoraSACConfig(priv_hidden_dims=()).validate()
    with pytest.raises(ConfigError, match=r"has none \(actor 6, critic 6\); use --algo sac"):
        make_hora_sac(CONFIG, OBS, OBS, ACT)


def test_the_torch_actor_acts_as_the_jax_actor(agent_and_state):
    """The torch ``PrivilegedSACActor`` (the facade's and the export's) with the JAX actor's
    weights copied by its table gives the JAX actor's actions and log-probabilities."""
    torch = pytest.importorskip("torch")
    from unilab_jax.torch.actors import PrivilegedSACActor
    from unilab_jax.torch.weights import jax_to_torch

    for dims in ((8, 4), (8, 5)):  # the embedding's width, or a projection to it
        config = HoraSACConfig(**{**CONFIG.__dict__, "priv_hidden_dims": dims})
        agent = make_hora_sac(config, OBS, CRITIC, ACT)
        state = agent.init(jax.random.PRNGKey(5))
        state = state.replace(actor_params=_perturbed(state.actor_params, jax.random.PRNGKey(6)))
        holder = torch.nn.Module()
        holder.actor = PrivilegedSACActor.from_config(config, OBS, ACT, priv_dim=CRITIC - OBS)
        jax_to_torch(state, holder.actor.jax_rows("actor"), holder)
        actor = holder.actor
        # Both on the same (already normalised) input: the facade normalises before acting.
        x = np.random.default_rng(7).normal(size=(5, CRITIC)).astype(np.float32)
        networks = make_sac_networks(config, ACT, OBS)
        mean, log_std = networks.actor.apply(state.actor_params, jnp.asarray(x))
        t_mean, t_log_std = actor.mean_and_log_std(torch.from_numpy(x))
        np.testing.assert_allclose(t_mean.detach().numpy(), mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(t_log_std.detach().numpy(), log_std, rtol=1e-5, atol=1e-6)
        noise = np.random.default_rng(8).normal(size=(5, ACT)).astype(np.float32)
        want, want_logp = sample_tanh_gaussian(mean, log_std, jnp.asarray(noise))
        got, got_logp, _ = actor.get_actions_and_log_probs(
            torch.from_numpy(x), torch.from_numpy(noise)
        )
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_logp.detach().numpy(), want_logp, rtol=1e-5, atol=1e-5)


def test_a_short_c_mujoco_run_on_sharpa_evaluates_saves_loads_and_refuses_export(tmp_path):
    from tests.test_sharpa import grasp_rows
    from unilab_jax import export_policy, load_policy
    from unilab_jax.config import TrainConfig
    from unilab_jax.policy.evaluate import evaluate
    from unilab_jax.policy.export import ExportError
    from unilab_jax.training.trainer import train

    np.save(tmp_path / "g_1.npy", grasp_rows(4))
    override = {"grasp_cache_path": str(tmp_path / "g"), "scale_list": (1.0,)}
    config = TrainConfig(
        env="SharpaInhandRotation", algo="hora_sac", physics="mujoco", num_envs=4,
        replay_buffer_n=8, batch_size=16, updates_per_step=1, learning_starts=1,
        max_iterations=4, log_interval=2, save_interval=2, eval_envs=2, eval_interval=4,
        env_overrides=override,
    )  # fmt: skip
    settings = dict(actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11)
    settings.update(priv_hidden_dims=(8, 4), priv_embed_dim=4)
    result = train(config, settings, quiet=True, log_dir=tmp_path / "run")
    assert np.isfinite(result.history[-1]["learner"]["qf_loss"])
    policy = load_policy(tmp_path / "run")
    assert policy.algo == "hora_sac" and policy.input_dim == 147 + 9
    out = evaluate(policy, episodes=2, seed=0, physics="mujoco")
    assert out.lengths.shape == (2,) and np.all(out.lengths >= 1)
    with pytest.raises(ExportError, match=r"reads 9 privileged values .* columns 147-155 of "
                       r"SharpaInhandRotation's critic observation \(object_pos_delta 3, "
                       r"friction 1, mass 1, com 3, scale 1\)"):  # fmt: skip
        export_policy(policy, "torchscript", tmp_path / "policy.ts")
    assert not (tmp_path / "policy.ts").exists()
