"""Public API of the torch facade `unilab.algos.torch.offpolicy`, checked against the API docs.

- The runtime hook (`runtime.resolve_custom_offpolicy_runtime`): resolver forms, config styles
  and every error path.
- A signature table transcribed by hand from the documented API (the `offpolicy` package page
  and its `worker` module page): every documented public callable with its exact parameter list
  and defaults, rendered the way the docs show them (no annotations). Plus the package exports,
  the class hierarchy and the documented submodules.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest

from unilab.algos.torch.offpolicy.runtime import (
    OffPolicyRuntime,
    resolve_custom_offpolicy_runtime,
)

PKG = "unilab.algos.torch.offpolicy"
WORKER = f"{PKG}.worker"
RUNTIME = f"{PKG}.runtime"
FAKE_MOD = "_fake_offpolicy_runtime_mod"


# ---------------------------------------------------------------------------------------------
# Runtime hook
# ---------------------------------------------------------------------------------------------


class _Learner:
    pass


class _PrivRuntime(OffPolicyRuntime):
    def build_model_kwargs(self, *, obs_dim: int, critic_obs_dim: int) -> dict:
        return {"priv_info_dim": critic_obs_dim - obs_dim}


def _resolve(rl_cfg):
    return _PrivRuntime(learner_cls=_Learner, algo_type="fake_sac", actor_kwargs={"k": 1})


@pytest.fixture
def fake_mod(monkeypatch):
    """A throwaway module in `sys.modules` holding resolvers (tests/torch is no package)."""
    mod = types.ModuleType(FAKE_MOD)
    mod.calls = []

    def resolve(rl_cfg):
        mod.calls.append(rl_cfg)
        return _resolve(rl_cfg)

    mod.resolve = resolve
    mod.resolve_wrong_type = lambda rl_cfg: {"learner_cls": _Learner, "algo_type": "sac"}
    mod.not_callable = 42
    mod.nested = types.SimpleNamespace(resolve=resolve)
    monkeypatch.setitem(sys.modules, FAKE_MOD, mod)
    return mod


def _dict_cfg(**algo):
    return {"algo": dict(algo)}


def _attr_cfg(**algo):
    return types.SimpleNamespace(algo=types.SimpleNamespace(**algo))


CFG_STYLES = pytest.mark.parametrize("make_cfg", [_dict_cfg, _attr_cfg], ids=["dict", "attr"])


def test_runtime_defaults_are_the_references_and_frozen():
    """All fields optional (the reference's): the empty runtime changes nothing of the standard
    SAC path; `build_model_kwargs` is keyword-only and returns a copy of `actor_kwargs`."""
    rt = OffPolicyRuntime()
    assert rt.learner_cls is None and rt.algo_type is None
    assert rt.actor_kwargs == {} and rt.supports_symmetry is True
    assert rt.build_model_kwargs(obs_dim=4, critic_obs_dim=6) == {}
    with pytest.raises(TypeError):
        rt.build_model_kwargs(4, 6)  # the reference's signature is keyword-only
    sized = OffPolicyRuntime(learner_cls=_Learner, algo_type="sac", actor_kwargs={"k": 1})
    built = sized.build_model_kwargs(obs_dim=10, critic_obs_dim=13)
    assert built == {"k": 1} and built is not sized.actor_kwargs
    # default_factory: no shared mutable default between instances
    assert OffPolicyRuntime().actor_kwargs is not rt.actor_kwargs
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        rt.algo_type = "td3"


def test_resolver_reads_the_algo_section_itself_as_the_references_script_passes_it(fake_mod):
    section = {"runtime_resolver": f"{FAKE_MOD}:resolve", "runtime_impl": "fake_sac"}
    rt = resolve_custom_offpolicy_runtime(section)
    assert isinstance(rt, OffPolicyRuntime) and rt.algo_type == "fake_sac"
    assert fake_mod.calls == [section]
    assert resolve_custom_offpolicy_runtime({"runtime_resolver": None}) is None
    with pytest.raises(ValueError, match="runtime_impl='hora_sac'.*runtime_resolver"):
        resolve_custom_offpolicy_runtime({"runtime_impl": "hora_sac"})


def test_resolver_returning_none_raises_value_error(fake_mod):
    fake_mod.resolve_none = lambda rl_cfg: None
    with pytest.raises(ValueError, match="returned None"):
        resolve_custom_offpolicy_runtime(_dict_cfg(runtime_resolver=f"{FAKE_MOD}:resolve_none"))


@CFG_STYLES
@pytest.mark.parametrize("ref", [f"{FAKE_MOD}:resolve", f"{FAKE_MOD}.resolve"])
def test_resolver_forms(fake_mod, make_cfg, ref):
    cfg = make_cfg(runtime_resolver=ref)
    rt = resolve_custom_offpolicy_runtime(cfg)
    assert isinstance(rt, OffPolicyRuntime)
    assert rt.learner_cls is _Learner
    assert rt.algo_type == "fake_sac"
    assert rt.actor_kwargs == {"k": 1}
    assert rt.build_model_kwargs(obs_dim=98, critic_obs_dim=101) == {"priv_info_dim": 3}
    assert fake_mod.calls == [cfg]  # called once, with the whole rl_cfg


def test_resolver_dotted_attr_after_colon(fake_mod):
    rt = resolve_custom_offpolicy_runtime(_dict_cfg(runtime_resolver=f"{FAKE_MOD}:nested.resolve"))
    assert isinstance(rt, OffPolicyRuntime)


@CFG_STYLES
def test_no_resolver_returns_none(make_cfg):
    assert resolve_custom_offpolicy_runtime(make_cfg()) is None
    assert resolve_custom_offpolicy_runtime(make_cfg(runtime_resolver=None)) is None
    assert resolve_custom_offpolicy_runtime(make_cfg(runtime_impl=None)) is None


@pytest.mark.parametrize(
    "cfg", [{}, {"algo": None}, types.SimpleNamespace(), types.SimpleNamespace(algo=None)]
)
def test_missing_algo_section_returns_none(cfg):
    assert resolve_custom_offpolicy_runtime(cfg) is None


@CFG_STYLES
def test_runtime_impl_without_resolver_raises(make_cfg):
    with pytest.raises(ValueError, match="runtime_resolver"):
        resolve_custom_offpolicy_runtime(make_cfg(runtime_impl="hora_sac"))
    with pytest.raises(ValueError, match="runtime_resolver"):
        resolve_custom_offpolicy_runtime(make_cfg(runtime_impl="hora_sac", runtime_resolver=None))


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "no_separator",
        f"{FAKE_MOD}:",
        ":resolve",
        ".resolve",
        f"{FAKE_MOD}.",
        "_no_such_module_for_unilab_tests:resolve",
        "_no_such_module_for_unilab_tests.resolve",
        f"{FAKE_MOD}:missing",
        f"{FAKE_MOD}.missing",
        f"{FAKE_MOD}:nested.missing",
    ],
)
def test_bad_resolver_string_raises_value_error(fake_mod, ref):
    with pytest.raises(ValueError) as excinfo:
        resolve_custom_offpolicy_runtime(_dict_cfg(runtime_resolver=ref))
    message = str(excinfo.value)
    assert repr(ref) in message  # names the offending string
    assert "module:attr" in message and "module.attr" in message  # and the expected format


def test_non_callable_resolver_raises_type_error(fake_mod):
    with pytest.raises(TypeError):
        resolve_custom_offpolicy_runtime(_dict_cfg(runtime_resolver=f"{FAKE_MOD}:not_callable"))


@CFG_STYLES
def test_resolver_wrong_return_type_raises_type_error(fake_mod, make_cfg):
    cfg = make_cfg(runtime_resolver=f"{FAKE_MOD}:resolve_wrong_type")
    with pytest.raises(TypeError, match="dict"):
        resolve_custom_offpolicy_runtime(cfg)


def test_runtime_module_exports():
    runtime = importlib.import_module(RUNTIME)
    assert sorted(runtime.__all__) == ["OffPolicyRuntime", "resolve_custom_offpolicy_runtime"]


# ---------------------------------------------------------------------------------------------
# Documented signatures
# ---------------------------------------------------------------------------------------------


def render_signature(obj) -> str:
    """`inspect.signature` without annotations or return type, in the docs' notation."""
    parts: list[str] = []
    star_done = False
    params = list(inspect.signature(obj).parameters.values())
    for i, p in enumerate(params):
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name if p.default is p.empty else f"{p.name}={p.default!r}"
        parts.append(text)
        is_last_posonly = p.kind is p.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY
        )
        if is_last_posonly:
            parts.append("/")
    return f"({', '.join(parts)})"


def _lookup(module_name: str, qualname: str):
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


LEARN = "(self, max_iterations=1500, save_interval=50, log_dir='logs', logger_type='tensorboard')"
COLLECTOR_FN = (
    "(stop_event, env_name, num_envs, replay_buffer, weight_sync_name, weight_param_shapes, "
    "algo_type='sac', actor_hidden_dim=512, use_layer_norm=True, learning_starts=0, "
    "metrics_queue=None, weight_sync_lock=None, sync_collection=False, "
    "collection_ready_queue=None, trainer_done_queue=None, env_steps_per_sync=1, "
    "obs_normalization=False, shared_obs_normalizer_stats=None, sim_backend='mujoco', "
    "env_cfg_override=None, obs_dim=None, action_dim=None, actor_kwargs=None, seed=None, "
    "trace_enabled=False, trace_thread_time=False, collector_pack_request_queue=None, "
    "collector_pack_ready_queue=None, collector_pack_shared_slots=None, **kwargs)"
)

# (qualname on the logger class, documented parameter list): shared by the facade rows and the
# rows for `unilab_jax.training.logger.OffPolicyLogger`, which the facade re-exports.
LOGGER_SIGNATURES = [
    (
        "OffPolicyLogger.__init__",
        "(self, algo_name='RL', max_iterations=1500, num_envs=4096, env_name='', obs_dim=0, "
        "action_dim=0, refresh_per_second=4, log_dir='', log_backend='tensorboard', "
        "wandb_project='unilab', wandb_entity=None, wandb_name='', wandb_group=None, "
        "wandb_job_type=None, wandb_tags=None, wandb_notes=None)",
    ),
    ("OffPolicyLogger.start", "(self, *, status='Warming up...')"),
    ("OffPolicyLogger.finish", "(self, *, title='Training Summary', extra_summary='')"),
    ("OffPolicyLogger.log_buffer_fill", "(self, current, target)"),
    ("OffPolicyLogger.update_collector_timing", "(self, timing_ms)"),
    ("OffPolicyLogger.update_done_rates", "(self, timeout_rate, terminated_rate)"),
    ("OffPolicyLogger.update_buffer_utilization", "(self, utilization)"),
    ("OffPolicyLogger.update_replay_queue", "(self, current_len, max_size)"),
    ("OffPolicyLogger.update_staging_pool", "(self, current_len, max_size)"),
    ("OffPolicyLogger.set_collection_sync", "(self, enabled, env_steps_per_sync=0)"),
    ("OffPolicyLogger.log_collector", "(self, total_steps, buffer_size, mean_reward=0.0)"),
    (
        "OffPolicyLogger.log_step",
        "(self, iteration, metrics=None, reward=None, reward_metrics=None, "
        "reward_components=None, train_time=0.0, wait_time=0.0, "
        "learner_incremental_h2d_time=0.0, weight_sync_time=0.0, extra_info=None)",
    ),
    ("OffPolicyLogger.log_status", "(self, status)"),
]

DOCUMENTED_SIGNATURES = [
    *((PKG, qualname, sig) for qualname, sig in LOGGER_SIGNATURES),
    (
        PKG,
        "OffPolicyRunner.__init__",
        "(self, learner, env_name, algo_type, num_envs=4096, replay_buffer_n=1024, "
        "batch_size=8192, learning_starts=0, updates_per_step=8, policy_frequency=4, "
        "sync_collection=True, env_steps_per_sync=1, device=None, actor_hidden_dim=512, "
        "use_layer_norm=True, obs_normalization=False, sim_backend='mujoco', "
        "env_cfg_override=None, actor_kwargs=None, seed=None, trace_enabled=False, "
        "trace_output_dir=None, trace_thread_time=False, trace_cuda_events=True)",
    ),
    (PKG, "OffPolicyRunner.learn", LEARN),
    (PKG, "OffPolicyRunner.close", "(self)"),
    (
        PKG,
        "MultiGPUOffPolicyRunner.validate_capabilities",
        "(*, algo_type, learner_kwargs, num_gpus)",
    ),
    (
        PKG,
        "MultiGPUOffPolicyRunner.__init__",
        "(self, learner, env_name, algo_type, learner_kwargs, num_gpus=1, **kwargs)",
    ),
    (PKG, "MultiGPUOffPolicyRunner.learn", LEARN),
    (PKG, "off_policy_collector_fn", COLLECTOR_FN),
    (WORKER, "off_policy_collector_fn", COLLECTOR_FN),
    (WORKER, "resolve_collector_actor_dims", "(env, obs_dim=None, action_dim=None)"),
    (
        WORKER,
        "sample_offpolicy_actions",
        "(actor, algo_type, obs_torch, prev_dones_torch, priv_info_torch=None)",
    ),
    (
        WORKER,
        "resolve_offpolicy_actor_priv_info",
        "(*, algo_type, obs_np, critic_np, info)",
    ),
    (RUNTIME, "resolve_custom_offpolicy_runtime", "(rl_cfg)"),
]


@pytest.mark.parametrize(
    ("module_name", "qualname", "expected"),
    DOCUMENTED_SIGNATURES,
    ids=[f"{m.removeprefix(PKG).lstrip('.') or 'pkg'}:{q}" for m, q, _ in DOCUMENTED_SIGNATURES],
)
def test_documented_signature(module_name, qualname, expected):
    assert render_signature(_lookup(module_name, qualname)) == expected


@pytest.mark.parametrize(
    ("qualname", "expected"), LOGGER_SIGNATURES, ids=[q for q, _ in LOGGER_SIGNATURES]
)
def test_jax_logger_signature(qualname, expected):
    """The facade re-exports `unilab_jax.training.logger.OffPolicyLogger`; it must match the docs
    too."""
    assert render_signature(_lookup("unilab_jax.training.logger", qualname)) == expected


def test_render_signature_notation():
    def f(a, b=1, /, c=None, *args, d, e="x", **kw):
        pass

    def g(x, *, y, z=0.5):
        pass

    assert render_signature(f) == "(a, b=1, /, c=None, *args, d, e='x', **kw)"
    assert render_signature(g) == "(x, *, y, z=0.5)"
    assert render_signature(lambda: None) == "()"


def test_validate_capabilities_is_static():
    runner_cls = _lookup(PKG, "MultiGPUOffPolicyRunner")
    assert isinstance(inspect.getattr_static(runner_cls, "validate_capabilities"), staticmethod)


def test_collector_fn_is_shared():
    pkg = importlib.import_module(PKG)
    worker = importlib.import_module(WORKER)
    assert pkg.off_policy_collector_fn is worker.off_policy_collector_fn


def test_package_exports():
    pkg = importlib.import_module(PKG)
    assert sorted(pkg.__all__) == sorted(
        ["OffPolicyLogger", "OffPolicyRunner", "MultiGPUOffPolicyRunner", "off_policy_collector_fn"]
    )
    assert len(pkg.__all__) == 4
    for name in pkg.__all__:
        assert hasattr(pkg, name), name


def test_logger_is_the_jax_logger():
    from unilab_jax.training.logger import BaseTrainingLogger
    from unilab_jax.training.logger import OffPolicyLogger as JaxOffPolicyLogger

    pkg = importlib.import_module(PKG)
    assert pkg.OffPolicyLogger is JaxOffPolicyLogger
    assert issubclass(pkg.OffPolicyLogger, BaseTrainingLogger)


def test_class_hierarchy():
    from unilab.ipc.async_runner import AsyncRunner

    pkg = importlib.import_module(PKG)
    double_buffer = importlib.import_module(f"{PKG}.double_buffer_runner")
    assert issubclass(pkg.OffPolicyRunner, AsyncRunner)
    assert issubclass(pkg.MultiGPUOffPolicyRunner, pkg.OffPolicyRunner)
    assert issubclass(double_buffer.DoubleBufferOffPolicyRunner, pkg.OffPolicyRunner)


DOCUMENTED_SUBMODULES = {
    "double_buffer_runner": (
        "Off-policy runner using CPU-pinned double-buffer replay pipeline (B path)."
    ),
    "multi_gpu_runner": "Multi-GPU off-policy runner using NCCL all-reduce for FastSAC.",
    "runner": "Unified runner for off-policy RL algorithms (SAC, TD3).",
    "runtime": "Runtime resolution helpers for off-policy script assembly.",
    "worker": "Off-policy collector for SAC and TD3.",
}


@pytest.mark.parametrize(
    ("submodule", "summary"), DOCUMENTED_SUBMODULES.items(), ids=list(DOCUMENTED_SUBMODULES)
)
def test_documented_submodule(submodule, summary):
    """Each documented submodule imports and opens its docstring with the documented summary."""
    module = importlib.import_module(f"{PKG}.{submodule}")
    assert (module.__doc__ or "").strip().splitlines()[:1] == [summary]
