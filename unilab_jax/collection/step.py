"""The fused training step: collect, store, update, all on device, under ``shard_map``.

One learner iteration (the "sync collection" unit of UniLab's reference runner) is:

1. ``env_steps_per_sync`` vectorised env steps with the exploration policy; each transition
   (with the true final observation of ended episodes) goes into the replay ring;
2. observation-normaliser statistics are updated from the freshly collected observations;
3. once ``max(batch_size, learning_starts * num_envs)`` rows are stored: one gather of
   ``batch_size * updates_per_step`` rows, then a ``lax.scan`` over the updates: critic (and SAC
   temperature) every update, actor when ``u % policy_frequency == 0``, Polyak target every
   update.

``log_interval`` iterations are scanned inside one jitted call whose state argument is donated;
the host syncs once per call.

Data parallelism is a parameter: the same body always runs under ``shard_map`` over the 1-D
mesh axis ``"data"`` (a mesh of one device included). Envs, exploration state, episode
statistics and the replay rows are split over the axis; the learner state is replicated; each
device samples ``batch_size / n_devices`` rows from its own shard, and the agent averages
gradients and normaliser statistics over the axis (``check_vma=False`` plus explicit
``pmean``), so the global batch does not depend on the device count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh
from jax.sharding import PartitionSpec as P

from unilab_jax.algos.agent import Agent, Transition, actor_observation
from unilab_jax.collection.replay import ReplayState, init_replay, replay_insert, replay_sample
from unilab_jax.config import TrainConfig
from unilab_jax.envs import Env, EnvState

__all__ = [
    "DATA_AXIS",
    "LearnerState",
    "TrainState",
    "learner_specs",
    "make_chunk_step",
    "make_evaluate",
    "make_init_fn",
    "make_mesh",
    "make_train_step",
]

DATA_AXIS = "data"
_SHARDED = P(DATA_AXIS)
_REPLICATED = P()


@flax.struct.dataclass
class TrainState:
    """Everything the loop carries, as one pytree of arrays (leaves per env are ``[N, ...]``)."""

    agent: Any  # the algorithm's state (params, targets, optimisers, normalisers); replicated
    explore: Any  # per-env exploration state (TD3 noise scales)
    env: EnvState  # batched env state
    prev_done: jax.Array  # [N] bool, episode ended on the previous step
    episode_return: jax.Array  # [N] float32, running return of the current episode
    episode_length: jax.Array  # [N] int32
    replay: ReplayState
    key: jax.Array  # replicated PRNG key
    iteration: jax.Array  # [] int32, learner iterations done


def state_specs() -> TrainState:
    """Partition specs of ``TrainState`` over the ``"data"`` axis (a pytree prefix)."""
    return TrainState(
        agent=_REPLICATED,
        explore=_SHARDED,
        env=_SHARDED,
        prev_done=_SHARDED,
        episode_return=_SHARDED,
        episode_length=_SHARDED,
        replay=ReplayState(data=_SHARDED, insert_slot=_REPLICATED, filled=_REPLICATED),
        key=_REPLICATED,
        iteration=_REPLICATED,
    )


def make_mesh(num_devices: int) -> Mesh:
    """A 1-D ``"data"`` mesh over the first ``num_devices`` devices (Auto axis type, so
    ``shard_map`` accepts unsharded inputs; jax 0.10 defaults to Explicit)."""
    devices = np.asarray(jax.devices()[:num_devices])
    return Mesh(devices, (DATA_AXIS,), axis_types=(AxisType.Auto,))


def _transition(state: EnvState, actions: jax.Array, nxt: EnvState) -> Transition:
    """The row stored for one env step: next obs is the true final obs of ended episodes."""
    return Transition(
        obs=state.obs["obs"],
        critic=state.obs["critic"],
        actions=actions,
        rewards=nxt.reward,
        next_obs=nxt.final_obs["obs"],
        next_critic=nxt.final_obs["critic"],
        terminated=nxt.terminated.astype(jnp.float32),
        truncated=nxt.truncated.astype(jnp.float32),
    )


def make_init_fn(config: TrainConfig, env: Env, agent: Agent, mesh: Mesh) -> Callable:
    """``init(key) -> TrainState``, built directly with the right sharding."""
    local_envs = config.num_envs // config.num_devices

    def init(key: jax.Array) -> TrainState:
        k_agent, k_local, k_loop = jax.random.split(key, 3)
        # Per-device randomness for envs and exploration; learner parameters are replicated.
        k_local = jax.random.fold_in(k_local, jax.lax.axis_index(DATA_AXIS))
        k_env, k_explore = jax.random.split(k_local)
        k_env, k_stagger = jax.random.split(k_env)
        env_state = jax.vmap(env.reset)(jax.random.split(k_env, local_envs))
        # Stagger the time limits so that episodes do not all end on the same step (smoother
        # data and return statistics). The reference's init_state draws staggered counters too,
        # but its reset of every env then zeroes them: its first episodes start together.
        env_state = env_state.replace(
            step_count=jax.random.randint(k_stagger, (local_envs,), 0, env.episode_length)
        )
        zero_actions = jnp.zeros((local_envs, env.action_size), jnp.float32)
        example = _transition(env_state, zero_actions, env_state)
        return TrainState(
            agent=agent.init(k_agent),
            explore=agent.init_explore(k_explore, local_envs),
            env=env_state,
            prev_done=jnp.zeros((local_envs,), bool),
            episode_return=jnp.zeros((local_envs,), jnp.float32),
            episode_length=jnp.zeros((local_envs,), jnp.int32),
            replay=init_replay(example, config.replay_buffer_n),
            key=k_loop,
            iteration=jnp.int32(0),
        )

    sharded = jax.shard_map(
        init, mesh=mesh, in_specs=_REPLICATED, out_specs=state_specs(), check_vma=False
    )
    return jax.jit(sharded)


def _collect(config: TrainConfig, env: Env, agent: Agent, ts: TrainState, key: jax.Array):
    """``env_steps_per_sync`` env steps; returns the new state pieces and collection stats."""
    step_env = env.step_batch
    n_local = ts.prev_done.shape[0]
    first_env = jax.lax.axis_index(DATA_AXIS) * n_local

    def env_step(carry, k):
        env_state, explore, prev_done, ep_ret, ep_len, replay = carry
        with jax.named_scope("explore"):
            seen = actor_observation(agent, env_state.obs)
            actions, explore = agent.explore(ts.agent, explore, seen, prev_done, k)
        with jax.named_scope("env_step"):
            nxt = step_env(env_state, actions)
        with jax.named_scope("replay_insert"):
            replay = replay_insert(replay, _transition(env_state, actions, nxt))
        done = nxt.terminated | nxt.truncated
        ep_ret = ep_ret + nxt.reward
        ep_len = ep_len + 1
        finite = jnp.isfinite(nxt.reward) & jax.tree.reduce(
            jnp.logical_and,
            jax.tree.map(lambda x: jnp.all(jnp.isfinite(x), axis=-1), nxt.final_obs),
        )
        stats = {
            "episodes": jnp.sum(done),
            "return_sum": jnp.sum(jnp.where(done, ep_ret, 0.0)),
            "length_sum": jnp.sum(jnp.where(done, ep_len, 0)),
            "terminated": jnp.sum(nxt.terminated & ~nxt.truncated),
            "truncated": jnp.sum(nxt.truncated),
            # First env (global index) whose step produced a non-finite value; a sentinel
            # larger than any index when all are finite.
            "nan_env": jnp.min(jnp.where(finite, config.num_envs, first_env + jnp.arange(n_local))),
            "components": {name: jnp.mean(v) for name, v in nxt.metrics.items()},
            "obs": env_state.obs["obs"],
            "critic": env_state.obs["critic"],
            "rewards": nxt.reward,
            "dones": done,
        }
        ep_ret = jnp.where(done, 0.0, ep_ret)
        ep_len = jnp.where(done, 0, ep_len)
        return (nxt, explore, done, ep_ret, ep_len, replay), stats

    carry = (ts.env, ts.explore, ts.prev_done, ts.episode_return, ts.episode_length, ts.replay)
    keys = jax.random.split(key, config.env_steps_per_sync)
    carry, stats = jax.lax.scan(env_step, carry, keys)
    return carry, stats


def _reduce_collect_stats(stats: dict) -> dict:
    """Sum per-step collection stats over steps and devices into replicated scalars."""
    out = {
        name: jax.lax.psum(jnp.sum(stats[name]).astype(jnp.float32), DATA_AXIS)
        for name in ("episodes", "return_sum", "length_sum", "terminated", "truncated")
    }
    out["nan_env"] = jax.lax.pmin(jnp.min(stats["nan_env"]), DATA_AXIS)
    out["components"] = jax.tree.map(
        lambda v: jax.lax.pmean(jnp.mean(v), DATA_AXIS), stats["components"]
    )
    return out


def _make_update_block(config: TrainConfig, agent: Agent, example: TrainState):
    """``(agent_state, replay, key) -> (agent_state, metrics)``: one gather, then the scan.

    ``example`` is the per-device state being traced (for the metric shapes)."""
    local_batch = config.batch_size // config.num_devices
    n_updates = config.updates_per_step
    pf = config.resolved_policy_frequency

    # Metric structures, so the skipped-actor branch and the not-ready branch can return zeros.
    batch_example = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((local_batch, *x.shape[2:]), x.dtype),
        example.replay.data,
    )
    key_example = jax.ShapeDtypeStruct((2,), jnp.uint32)
    _, critic_shapes = jax.eval_shape(
        agent.update_critic, example.agent, batch_example, key_example
    )
    _, actor_shapes = jax.eval_shape(agent.update_actor, example.agent, batch_example, key_example)

    def zeros(shapes):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    def update_block(agent_state, replay: ReplayState, key: jax.Array):
        k_sample, k_update = jax.random.split(key)
        # Each device draws its own rows from its own shard.
        k_sample = jax.random.fold_in(k_sample, jax.lax.axis_index(DATA_AXIS))
        with jax.named_scope("replay_sample"):
            batch = replay_sample(replay, k_sample, local_batch * n_updates)
        batches = jax.tree.map(lambda x: x.reshape(n_updates, local_batch, *x.shape[1:]), batch)

        def one_update(st, inputs):
            u, b, k = inputs
            k_critic, k_actor = jax.random.split(k)
            with jax.named_scope("critic_update"):
                st, critic_metrics = agent.update_critic(st, b, k_critic)
            do_actor = u % pf == 0
            with jax.named_scope("actor_update"):
                st, actor_metrics = jax.lax.cond(
                    do_actor,
                    lambda s: agent.update_actor(s, b, k_actor),
                    lambda s: (s, zeros(actor_shapes)),
                    st,
                )
            with jax.named_scope("target_update"):
                st = agent.update_target(st)
            return st, (critic_metrics, actor_metrics, do_actor)

        inputs = (jnp.arange(n_updates), batches, jax.random.split(k_update, n_updates))
        agent_state, (cm, am, did) = jax.lax.scan(one_update, agent_state, inputs)
        n_actor = jnp.maximum(jnp.sum(did), 1)
        metrics = jax.tree.map(lambda v: jnp.mean(v, axis=0), cm)
        metrics.update(
            jax.tree.map(lambda v: jnp.sum(jnp.where(did, v, 0.0), axis=0) / n_actor, am)
        )
        return agent_state, metrics

    def skip_block(agent_state, replay, key):
        metrics = dict(zeros(critic_shapes))
        metrics.update(zeros(actor_shapes))
        return agent_state, metrics

    return update_block, skip_block


def _learn(agent, agent_state, replay, steps, key, slots_needed, update_block, skip_block):
    """What follows collection in an iteration: the normaliser statistics from the freshly
    collected observations (``steps``: a dict of ``obs`` / ``critic`` ``[S, N_local, d]``,
    ``rewards`` / ``dones`` ``[S, N_local]``), the agent's reward statistics if it keeps any,
    then the update block once the replay holds ``slots_needed`` slots. Returns the agent
    state and the learner's metrics (``learner``, ``learning``, ``buffer_rows``; replicated)."""
    flat = lambda x: x.reshape(-1, x.shape[-1])  # noqa: E731  [S, N, d] -> [S*N, d]
    with jax.named_scope("normalizers"):
        agent_state = agent.update_normalizers(
            agent_state, flat(steps["obs"]), flat(steps["critic"])
        )
        if agent.observe_rewards is not None:
            agent_state = agent.observe_rewards(agent_state, steps["rewards"], steps["dones"])
    # Same on every device (all insert in lockstep), so the branch is uniform.
    ready = replay.filled >= slots_needed
    agent_state, learner_metrics = jax.lax.cond(
        ready, update_block, skip_block, agent_state, replay, key
    )
    rows = jax.lax.psum(replay.filled * replay.data.rewards.shape[0], DATA_AXIS)
    return agent_state, {
        "learner": learner_metrics,
        "learning": ready,
        "buffer_rows": rows,
        "params_finite": all_finite(agent_state),
    }


def all_finite(tree: Any) -> jax.Array:
    """[] bool: every floating leaf of ``tree`` is finite (a learner that diverged is stopped
    on the host by ``records.check_learner_finite``; one reduction per leaf, no transfer)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])) if leaves else True


@flax.struct.dataclass
class LearnerState:
    """The learner's part of a ``TrainState``: what a step fed by host-collected chunks
    (``make_chunk_step``) carries between iterations. The env side lives with the collector."""

    agent: Any
    replay: ReplayState
    key: jax.Array
    iteration: jax.Array


def learner_specs() -> LearnerState:
    """Partition specs of ``LearnerState`` (as in ``state_specs``)."""
    specs = state_specs()
    return LearnerState(
        agent=specs.agent, replay=specs.replay, key=specs.key, iteration=_REPLICATED
    )


def make_chunk_step(
    config: TrainConfig, agent: Agent, mesh: Mesh, trace_counter: list[int] | None = None
) -> Callable[[LearnerState, Transition], tuple[LearnerState, dict]]:
    """``step(learner, chunk) -> (learner, metrics)``: one learner iteration fed by a chunk
    collected outside the device step (C MuJoCo on CPU threads, ``unilab_jax.collection.mujoco``).

    ``chunk`` is a ``Transition`` of ``[env_steps_per_sync, num_envs, ...]`` rows (sharded over
    envs like the replay); the step inserts it, updates the normalisers from its observations
    and runs the same update block as ``make_train_step``. ``learner`` is donated; ``metrics``
    are the learner's (``learner``, ``learning``, ``buffer_rows``), replicated.
    """
    slots_needed = -(-config.train_start_rows // config.num_envs)

    def run(ls: LearnerState, chunk: Transition):
        if trace_counter is not None:
            trace_counter[0] += 1
        key, k_update = jax.random.split(ls.key)
        with jax.named_scope("replay_insert"):
            replay, _ = jax.lax.scan(lambda r, row: (replay_insert(r, row), None), ls.replay, chunk)
        example = TrainState(
            agent=ls.agent, explore=(), env=None, prev_done=None, episode_return=None,
            episode_length=None, replay=replay, key=key, iteration=ls.iteration,
        )  # fmt: skip
        update_block, skip_block = _make_update_block(config, agent, example)
        steps = {
            "obs": chunk.obs, "critic": chunk.critic, "rewards": chunk.rewards,
            "dones": (chunk.terminated + chunk.truncated) > 0,
        }  # fmt: skip
        agent_state, metrics = _learn(
            agent, ls.agent, replay, steps, k_update, slots_needed, update_block, skip_block
        )
        return LearnerState(agent_state, replay, key, ls.iteration + 1), metrics

    chunk_spec = P(None, DATA_AXIS)
    sharded = jax.shard_map(
        run,
        mesh=mesh,
        in_specs=(learner_specs(), chunk_spec),
        out_specs=(learner_specs(), _REPLICATED),
        check_vma=False,
    )
    return jax.jit(sharded, donate_argnums=0)


def make_train_step(
    config: TrainConfig,
    env: Env,
    agent: Agent,
    mesh: Mesh,
    num_iterations: int,
    trace_counter: list[int] | None = None,
) -> Callable[[TrainState], tuple[TrainState, dict]]:
    """``step(state) -> (state, metrics)``: ``num_iterations`` iterations in one jitted call.

    The state argument is donated. ``metrics`` leaves are ``[num_iterations]`` (replicated).
    ``trace_counter``, when given, counts how often the body is traced (tests use it to check
    the step compiles once).
    """
    slots_needed = -(-config.train_start_rows // config.num_envs)  # ceil: rows -> env steps

    def iteration(ts: TrainState, _, update_block, skip_block):
        key, k_collect, k_update = jax.random.split(ts.key, 3)
        k_collect = jax.random.fold_in(k_collect, jax.lax.axis_index(DATA_AXIS))
        carry, stats = _collect(config, env, agent, ts, k_collect)
        env_state, explore, prev_done, ep_ret, ep_len, replay = carry
        agent_state, learned = _learn(
            agent, ts.agent, replay, stats, k_update, slots_needed, update_block, skip_block
        )
        metrics = _reduce_collect_stats(stats)
        metrics.update(learned)
        ts = TrainState(
            agent=agent_state,
            explore=explore,
            env=env_state,
            prev_done=prev_done,
            episode_return=ep_ret,
            episode_length=ep_len,
            replay=replay,
            key=key,
            iteration=ts.iteration + 1,
        )
        return ts, metrics

    def run(ts: TrainState):
        if trace_counter is not None:
            trace_counter[0] += 1
        # Built here, inside shard_map, where the "data" axis is bound (the metric shapes are
        # found by tracing the update functions, which reduce over the axis).
        blocks = _make_update_block(config, agent, ts)
        body = lambda carry, x: iteration(carry, x, *blocks)  # noqa: E731
        return jax.lax.scan(body, ts, None, length=num_iterations)

    sharded = jax.shard_map(
        run,
        mesh=mesh,
        in_specs=(state_specs(),),
        out_specs=(state_specs(), _REPLICATED),
        check_vma=False,
    )
    return jax.jit(sharded, donate_argnums=0)


def make_evaluate(
    env: Env, act: Callable, num_envs: int, observe: Callable | None = None
) -> Callable:
    """``evaluate(agent_state, key) -> (mean_return, returns [num_envs], lengths [num_envs])``:
    one full episode per env from fresh resets with the deterministic policy
    ``act(agent_state, obs)`` (an ``Agent.act``: SAC's tanh of the mean, TD3's actor without
    noise) on ``observe(obs dict)`` (default the ``"obs"`` group; a privileged actor's
    ``functools.partial(actor_observation, agent)``). Episodes that terminate early stop
    accumulating reward and length."""

    def evaluate(agent_state, key: jax.Array):
        state = jax.vmap(env.reset)(jax.random.split(key, num_envs))

        def step(carry, _):
            env_state, alive, total, length = carry
            seen = env_state.obs["obs"] if observe is None else observe(env_state.obs)
            actions = act(agent_state, seen)
            nxt = env.step_batch(env_state, actions)
            total = total + jnp.where(alive, nxt.reward, 0.0)
            length = length + alive.astype(jnp.int32)
            alive = alive & ~(nxt.terminated | nxt.truncated)
            return (nxt, alive, total, length), None

        zeros = jnp.zeros((num_envs,), jnp.float32)
        init = (state, jnp.ones((num_envs,), bool), zeros, zeros.astype(jnp.int32))
        (_, _, returns, lengths), _ = jax.lax.scan(step, init, None, length=env.episode_length)
        return jnp.mean(returns), returns, lengths

    return jax.jit(evaluate)
