"""``sim_backend="mujoco"``: :class:`MujocoVecEnv`, a batch of C MuJoCo envs on CPU threads.

The reference system's backend: C MuJoCo physics (``mujoco_backend.MujocoBatchPhysics``)
stepped on ``nthread`` CPU threads, with the task's ``ctrl_from_action`` and
:func:`~unilab_jax.envs.base.post_physics` (observation, reward, termination, time limit,
reset draw) run as jitted, vmapped JAX code on a CPU device, the same code the MJX env runs.
Only applying the reset differs: the reset rows are written into the C batch. Also here:
:meth:`MujocoVecEnv.snapshot` / :meth:`MujocoVecEnv.restore`, the batch's exact state. Built
by :func:`~unilab_jax.envs.vec_env.make`; the host side is
:class:`~unilab_jax.envs.vec_env_base.VecEnv`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.base import (
    EnvState,
    Task,
    draw_initial_conditions,
    model_params,
    post_physics,
    reset_observation,
    where_done,
)
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task
from unilab_jax.envs.vec_env_base import VecEnv, VecEnvState, writable

__all__ = ["MujocoVecEnv"]


class MujocoVecEnv(VecEnv):
    """``sim_backend="mujoco"``: a batch of C MuJoCo envs on ``nthread`` CPU threads.

    A step: ``ctrl_from_action`` (jitted, vmapped; skipped when it is the identity), C MuJoCo
    physics for the batch, then :func:`~unilab_jax.envs.base.post_physics` (jitted, vmapped)
    on a :class:`~unilab_jax.envs.mujoco_backend.PhysicsView` of the fields the task reads,
    then the reset applied to the ended rows of the batch and their fresh observation.

    Attributes beyond :class:`VecEnv`'s: ``physics`` (the
    :class:`~unilab_jax.envs.mujoco_backend.MujocoBatchPhysics`) and, from it, ``batch`` (the
    ``mujoco.batch.Batch``; ``batch.qpos`` etc. are live float64 views of the physics state),
    ``model`` (the batch's model: the task's with automatic reset disabled), ``nthread`` and
    ``fields`` (the ``mjx.Data`` fields the task reads). :meth:`close` drops the batch and every
    array bound from it, which stops its threads; a ``batch`` (or bound array) the caller still
    holds keeps them alive until it is released too.
    """

    sim_backend = "mujoco"

    def __init__(
        self,
        task: Task,
        name: str,
        num_envs: int,
        seed: int = 0,
        *,
        nthread: int | None = None,
        device: jax.Device | None = None,
        rows: tuple[int, int] | None = None,
        block: int | None = None,
    ) -> None:
        # ``device``: the CPU device the task's JAX code runs on (default: the first); a
        # collector that overlaps with a learner on another CPU device passes its own.
        # ``rows``: ``(first, total)`` when this batch is one process's share of a larger one.
        # ``block``: the per-env JAX programs run on blocks of this many rows (a divisor of
        # ``num_envs``; default all of them), so that a row's bits do not depend on how many
        # blocks one batch holds (see ``_in_blocks``).
        self._cpu = jax.devices("cpu")[0] if device is None else device
        trace = trace_task(task, self._cpu)
        super().__init__(
            task, name, num_envs, seed, {k: v.shape[-1] for k, v in trace.state.obs.items()}
        )
        if rows is not None:
            first, total = (int(r) for r in rows)
            if not 0 <= first <= total - self.num_envs:
                raise ValueError(f"rows {rows} do not hold {self.num_envs} envs")
            self.rows = (first, total)
        self._set_reward_keys(trace.state.metrics)
        self.physics = MujocoBatchPhysics(
            task.model,
            task.n_frames,
            self.num_envs,
            trace.template,
            trace.fields,
            name=name,
            nthread=nthread,
            model_fields=task.model_fields,
            solver_warmstart=task.solver_warmstart,
            float32_state=task.float32_state,
            post_step_forward=task.post_step_forward,
        )
        # The default ctrl_from_action is the identity: skip a jit dispatch per step.
        self._identity_ctrl = type(task).ctrl_from_action is Task.ctrl_from_action
        if block is not None and (block < 1 or self.num_envs % block):
            raise ValueError(f"block {block} does not divide {self.num_envs} envs")
        per_env = lambda fn: _in_blocks(jax.jit(jax.vmap(fn)), block)  # noqa: E731
        self._ctrl_fn = per_env(
            lambda a, ts: jnp.asarray(task.ctrl_from_action(a, ts), jnp.float32)
        )
        self._xfrc_fn = per_env(task.xfrc_applied) if task.applies_forces else None

        def fresh(data: Any, task_state: Any, done: jax.Array) -> tuple[Any, Any]:
            # A fresh episode's observation and task state, the task state kept where not done.
            obs, started = reset_observation(task, data, task_state)
            return obs, where_done(done, started, task_state)

        self._fresh_fn = per_env(fresh)
        self._initial_fn = per_env(lambda k: draw_initial_conditions(task, k))

        def post(*args: Any) -> tuple[EnvState, tuple[jax.Array, jax.Array]]:
            state, reset = post_physics(task, *args)
            # The view is the host's: returning it would copy every field out of the jit.
            return state.replace(physics=None), reset

        self._post_fn = per_env(post)
        self._batch_fn = jax.jit(task.update_batch) if task.has_batch_update else None

        # Per-env carry between steps (set by init_state).
        self._task_state: Any = None
        self._keys: jax.Array | None = None
        self._step_count = np.zeros(self.num_envs, np.int32)

    @property
    def batch(self) -> Any:
        return self.physics.batch

    @property
    def task_state(self) -> Any:
        """The batch's task state (JAX arrays ``[N, ...]`` on this env's CPU device)."""
        return self._task_state

    @property
    def model(self) -> Any:
        return self.physics.model

    @property
    def nthread(self) -> int:
        return self.physics.nthread

    @property
    def fields(self) -> tuple[str, ...]:
        return self.physics.fields

    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        with jax.default_device(self._cpu):
            keys = jax.device_put(keys, self._cpu)
            qpos0, qvel0, task_state, keys = self._initial_fn(keys)
            self.physics.init(None, np.asarray(qpos0), np.asarray(qvel0), _host_params(task_state))
            everyone = jnp.ones(self.num_envs, bool)
            obs, task_state = self._fresh_fn(PhysicsView(self.physics.view()), task_state, everyone)
            obs = jax.device_get(obs)
        self._task_state, self._keys = task_state, keys
        self._step_count = step_count.astype(np.int32, copy=True)
        return {k: np.asarray(v) for k, v in obs.items()}

    def _step(self, actions: np.ndarray) -> VecEnvState:
        with jax.default_device(self._cpu):
            if self._identity_ctrl:
                ctrl = actions
            else:
                ctrl = np.asarray(self._ctrl_fn(actions, self._task_state))
            xfrc = None if self._xfrc_fn is None else np.asarray(self._xfrc_fn(self._task_state))
            self.physics.step(ctrl, xfrc)
            view = self.physics.view()
            out, (qpos0, qvel0) = self._post_fn(
                PhysicsView(view), actions, self._task_state, self._keys, self._step_count
            )
            if self._batch_fn is not None:  # what the batch shares (pipeline.finish_batch)
                task_state = self._batch_fn(
                    out.task_state, out.terminated, out.truncated, self._step_count + 1
                )
                out = out.replace(task_state=task_state)
            # One transfer of what the host needs; the carry stays in JAX arrays.
            host, (qpos0, qvel0) = jax.device_get(
                (out.replace(task_state=None, key=None), (qpos0, qvel0))
            )
            final_obs = {k: np.asarray(v) for k, v in host.obs.items()}
            done = np.asarray(host.done)
            if done.any():
                # Applying the reset, C MuJoCo's way: write the ended rows, observe them again.
                ids = np.flatnonzero(done)
                params = {f: v[ids] for f, v in _host_params(out.task_state).items()}
                self.physics.init(ids, qpos0[ids], qvel0[ids], params)
                self.physics.refresh_rows(view, ids)
                fresh, task_state = self._fresh_fn(PhysicsView(view), out.task_state, done)
                out = out.replace(task_state=task_state)
                fresh = jax.device_get(fresh)
                obs = {k: np.where(done[:, None], fresh[k], v) for k, v in final_obs.items()}
            else:
                obs = dict(final_obs)  # VecEnv.step makes obs and final_observation distinct
        self._task_state, self._keys = out.task_state, out.key
        self._step_count = np.asarray(host.step_count, np.int32)
        return VecEnvState(
            obs=obs,
            reward=np.asarray(host.reward),
            terminated=np.asarray(host.terminated),
            truncated=np.asarray(host.truncated),
            final_observation=final_obs,
            info=self._step_info(host.metrics, self._step_count.copy()),
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything that decides the batch's future, as numpy arrays with leading ``[N]``:
        the C MuJoCo integration state (``mjSTATE_INTEGRATION``: qpos, qvel, act, time, solver
        warm start) as the bits of its float64 words (``uint32 [N, 2 * nstate]``, so it fits a
        JAX array without x64 and restores bit-exactly), the current observation groups, task
        state, per-env keys and step counters. :meth:`restore` continues exactly from it."""
        if self.state is None:
            raise RuntimeError(f"{self!r}: no state yet (call init_state first)")
        words = np.ascontiguousarray(self.batch.state, dtype=np.float64).view(np.uint32)
        return {
            "physics": words.copy(),
            "obs": {k: np.array(v) for k, v in self.state.obs.items()},
            "task_state": jax.tree.map(np.asarray, jax.device_get(self._task_state)),
            "key": np.asarray(jax.device_get(self._keys)),
            "step_count": self._step_count.copy(),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> VecEnvState:
        """Continue from a :meth:`snapshot` (of a batch of the same task and size)."""
        self._ensure_open()
        words = np.ascontiguousarray(np.asarray(snapshot["physics"], np.uint32))
        physics = words.view(np.float64)
        if physics.shape != self.batch.state.shape:
            raise ValueError(
                f"{self.name}: snapshot physics state {physics.shape} does not fit this batch "
                f"{self.batch.state.shape} (another task or num_envs)"
            )
        self.batch.state[:] = physics
        # The per-episode model fields are model, not integration state: written apart.
        self.physics.set_params(None, _host_params(snapshot["task_state"]))
        with jax.default_device(self._cpu):
            self._task_state = jax.device_put(snapshot["task_state"], self._cpu)
            self._keys = jax.device_put(np.asarray(snapshot["key"]), self._cpu)
        self._step_count = np.asarray(snapshot["step_count"], np.int32).copy()
        obs = {k: np.array(v, np.float32) for k, v in snapshot["obs"].items()}
        self.state = writable(self._unstepped(obs, self._step_count))
        return self.state

    def _release(self) -> None:
        self.physics.close()
        self._task_state = self._keys = None


def _in_blocks(fn: Callable[..., Any], block: int | None) -> Callable[..., Any]:
    """``fn`` (jitted and vmapped over the leading env axis of every argument) run on blocks of
    ``block`` rows, the results concatenated: each block is computed by the one compiled
    program for ``block`` rows. XLA:CPU's kernels (YNNPACK's dots among them) choose their
    blocking by the rows of a call and by the CPU's vector ISA, so the same rows in a call of
    another size need not give the same bits; a batch of 2 blocks in one process then computes
    what 2 processes of 1 block compute."""
    if block is None:
        return fn

    def run(*args: Any) -> Any:
        n = len(jax.tree.leaves(args)[0])
        if n == block:
            return fn(*args)
        outs = [fn(*jax.tree.map(lambda x, i=i: x[i : i + block], args))
                for i in range(0, n, block)]  # fmt: skip
        return jax.tree.map(lambda *xs: jnp.concatenate(xs), *outs)

    return run


def _host_params(task_state: Any) -> dict[str, np.ndarray]:
    """The per-episode model fields of a batch's task state, as numpy arrays ``[N, ...]``."""
    return {f: np.asarray(v) for f, v in model_params(task_state).items()}
