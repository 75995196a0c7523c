"""Per-task presets: which family a name belongs to, given values win, every preset is valid."""

import dataclasses

import jax
import pytest

from unilab_jax.algos.registry import get_algo
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.training.presets import _PRESETS, family_of, get_preset, preset_configs, preset_line


@pytest.mark.parametrize(
    ("env", "family"),
    [
        ("PendulumSwingup", "dm_control"),
        ("CheetahRun", "dm_control"),
        ("playground/CartpoleBalance", "dm_control"),
        ("playground/FishSwim", "dm_control"),
        ("Go1JoystickFlat", "locomotion"),
        ("G1WalkFlat", "locomotion"),
        ("G1WalkRough", "locomotion"),
        ("playground/Go1JoystickFlatTerrain", "locomotion"),
        ("playground/G1JoystickRoughTerrain", "locomotion"),
        ("brax/ant", "brax"),
        ("G1MotionTrackingSAC", "tracking"),
        ("G1FlipTrackingSAC", "tracking"),
        ("G1WallFlipTrackingSAC", "tracking"),
        ("MyOwnTask", None),
    ],
)
def test_family_by_env_name(env, family):
    assert family_of(env) == family


def test_a_task_registered_with_a_family_gets_its_preset():
    from unilab_jax.envs.pendulum import PendulumSwingup, PendulumSwingupConfig
    from unilab_jax.envs.registry import _REGISTRY, register

    register("MyFamilyTask", PendulumSwingup, PendulumSwingupConfig(), family="dm_control")
    try:
        assert get_preset("MyFamilyTask", "cpu") == get_preset("PendulumSwingup", "cpu")
    finally:
        del _REGISTRY["MyFamilyTask"]
    assert family_of("MyFamilyTask") is None


def test_the_scale_follows_the_jax_backend_and_none_turns_presets_off():
    assert get_preset("CheetahRun").scale == "cpu"  # the tests run on JAX's CPU backend
    assert get_preset("CheetahRun", "gpu").train["num_envs"] == 1024
    assert get_preset("CheetahRun", "none") is None
    assert get_preset("MyOwnTask") is None
    with pytest.raises(ValueError, match="unknown preset scale 'big'; choose one of auto, cpu"):
        get_preset("CheetahRun", "big")


def test_our_robots_collect_with_c_mujoco_on_a_cpu_playgrounds_stay_on_mjx():
    for env in ("Go1JoystickFlat", "Go2JoystickFlat", "G1WalkFlat"):
        config, _ = preset_configs(env, "td3", "cpu")
        assert config.physics == "mujoco"
        config.validate()
        assert preset_configs(env, "td3", "gpu")[0].physics == "mjx"
    assert preset_configs("playground/Go1JoystickFlatTerrain", "td3", "cpu")[0].physics == "mjx"
    assert "physics=mujoco" in preset_line(get_preset("G1WalkFlat", "cpu"), "td3")
    config, _ = preset_configs("G1WalkFlat", "td3", "cpu", train={"physics": "mjx"})
    assert config.physics == "mjx"  # a given value wins


def test_the_references_g1_trains_with_symmetry_on_a_cpu():
    """G1's CPU preset turns symmetry augmentation on (TD3 also narrows its exploration noise)
    and builds; Go2 (which walks without it) and our Go1 keep their measured recipes."""
    from unilab_jax.envs import registry

    assert "G1WalkFlat" in registry.mirrored_names()
    config, sac = preset_configs("G1WalkFlat", "sac", "cpu")
    assert (sac["use_symmetry"], sac["obs_normalization"]) == (True, False)
    assert (config.replay_buffer_n, config.learning_starts) == (512, 10)  # the reference's
    assert (sac["v_min"], sac["v_max"]) == (-20.0, 20.0)  # its fixed support, not the derived
    assert preset_configs("G1WalkFlat", "td3", "cpu")[0].replay_buffer_n == 1024
    td3 = preset_configs("G1WalkFlat", "td3", "cpu")[1]
    assert (td3["use_symmetry"], td3["std_min"], td3["std_max"]) == (True, 0.05, 0.4)
    assert "use_symmetry=True" in preset_line(get_preset("G1WalkFlat", "cpu"), "td3")
    assert "use_symmetry" not in preset_configs("G1WalkFlat", "td3", "gpu")[1]
    for env in ("Go2JoystickFlat", "Go1JoystickFlat"):
        assert "use_symmetry" not in preset_configs(env, "sac", "cpu")[1]
    off = preset_configs("G1WalkFlat", "sac", "cpu", algo_settings={"use_symmetry": False})[1]
    assert off["use_symmetry"] is False  # a given value wins


def test_g1_on_rough_ground_takes_g1_on_flat_grounds_presets():
    """The reference's G1WalkRough task file is G1WalkFlat's but for the task name: the same
    recipe and penalty weights, on every scale and algorithm, except that on a CPU SAC samples
    batch 1024 on rough ground and runs 8 updates per iteration (32 rows per new env step, the
    owner's GPU ratio)."""
    for scale in ("cpu", "gpu"):
        for algo in ("sac", "td3", "flash_sac"):
            assert (
                preset_configs("G1WalkRough", algo, scale)[1]
                == preset_configs("G1WalkFlat", algo, scale)[1]
            )
            rough_config = preset_configs("G1WalkRough", algo, scale)[0]
            flat_config = preset_configs("G1WalkFlat", algo, scale)[0]
            if (scale, algo) == ("cpu", "sac"):
                assert (flat_config.batch_size, rough_config.batch_size) == (512, 1024)
                assert (flat_config.updates_per_step, rough_config.updates_per_step) == (4, 8)
                rough_config = dataclasses.replace(rough_config, batch_size=512, updates_per_step=4)
            assert dataclasses.replace(rough_config, env="G1WalkFlat") == flat_config


def test_g1_trains_on_the_penalty_weights_the_reference_trains_with():
    """The reference's training builds its G1 env three times from one config and each build
    halves the penalty weights again: its collector's curriculum runs between 0.125 and 0.25
    of the declared weights. The task keeps the declared curriculum (0.5 to 1, the golden
    files'); the preset, for every algorithm, runs ours between 0.125 and 0.25."""
    from unilab_jax.envs.registry import make_task

    declared = make_task("G1WalkFlat").config
    assert (declared.curriculum_initial_scale, declared.curriculum_max_scale) == (0.5, 1.0)
    for algo in ("sac", "td3"):
        config, _ = preset_configs("G1WalkFlat", algo, "cpu")
        task = make_task("G1WalkFlat", config.env_overrides)
        c = task.config
        assert (c.curriculum_initial_scale, c.curriculum_min_scale) == (0.125, 0.125)
        assert c.curriculum_max_scale == 0.25
        assert float(task.init_task_state(jax.random.PRNGKey(0))["penalty_scale"]) == 0.125
    assert preset_configs("Go2JoystickFlat", "sac", "cpu")[0].env_overrides is None


@pytest.mark.parametrize(
    ("env", "ratio"), [("G1FlipTrackingSAC", 0.05), ("G1WallFlipTrackingSAC", 0.0)]
)
def test_the_flip_trackers_take_their_own_sac_owners_envs_and_entropy(env, ratio):
    """The flips' recipes: G1MotionTrackingSAC's with 4096 envs on a GPU and SAC's alpha from
    0.005 towards an entropy ratio of 0.05 (flip) or 0 (wall flip), at both scales."""
    gpu, sac = preset_configs(env, "sac", "gpu")
    base, base_sac = preset_configs("G1MotionTrackingSAC", "sac", "gpu")
    assert gpu.num_envs == 4096 and base.num_envs == 2048
    assert dataclasses.replace(gpu, env=base.env, num_envs=base.num_envs) == base
    assert (sac["alpha_init"], sac["target_entropy_ratio"]) == (0.005, ratio)
    assert {k: v for k, v in sac.items() if k not in ("alpha_init", "target_entropy_ratio")} == {
        k: v for k, v in base_sac.items() if k not in ("alpha_init", "target_entropy_ratio")
    }
    cpu, cpu_sac = preset_configs(env, "sac", "cpu")
    assert cpu.num_envs == preset_configs("G1MotionTrackingSAC", "sac", "cpu")[0].num_envs
    assert (cpu_sac["alpha_init"], cpu_sac["target_entropy_ratio"]) == (0.005, ratio)
    assert "alpha_init" not in preset_configs(env, "td3", "gpu")[1]


def test_g1wbtobs_takes_its_own_run_size_on_a_gpu_the_tracking_recipe_otherwise():
    """The reference's G1WBTObs owner differs from G1MotionTrackingSAC's in 4096 envs and
    140,000 iterations only; on a CPU both take the tracking CPU preset."""
    assert family_of("G1WBTObs") == "tracking"
    wbt, _ = preset_configs("G1WBTObs", "sac", "gpu")
    base, base_sac = preset_configs("G1MotionTrackingSAC", "sac", "gpu")
    assert (wbt.num_envs, wbt.max_iterations) == (4096, 140000)
    assert (base.num_envs, base.max_iterations) == (2048, 25000)
    same = {k: v for k, v in vars(wbt).items() if k not in ("env", "num_envs", "max_iterations")}
    assert same == {k: v for k, v in vars(base).items() if k in same}
    assert preset_configs("G1WBTObs", "sac", "gpu")[1] == base_sac
    assert "G1WBTObs's own recipe" in get_preset("G1WBTObs", "gpu").source
    assert get_preset("G1WBTObs", "cpu") == get_preset("G1MotionTrackingSAC", "cpu")


def test_the_trackers_cpu_preset_starts_alpha_low_and_keeps_the_update_rules():
    """On a CPU the tracker's SAC starts alpha at 0.001 instead of the GPU owner's 0.1 (whose
    entropy bonus outweighs the tracking reward for a CPU budget, ``presets.py``); every
    other update rule is the owner's."""
    _, gpu = preset_configs("G1MotionTrackingSAC", "sac", "gpu")
    _, cpu = preset_configs("G1MotionTrackingSAC", "sac", "cpu")
    assert (gpu["alpha_init"], cpu["alpha_init"]) == (0.1, 0.001)
    widths = ("actor_hidden_dim", "critic_hidden_dim", "alpha_init")
    assert {k: v for k, v in cpu.items() if k not in widths} == {
        k: v for k, v in gpu.items() if k not in widths
    }


def test_the_inhand_cpu_preset_keeps_the_recipes_update_rules_at_its_measured_sizes():
    """SharpaInhandRotation on a CPU: the reference's HORA-SAC owner (the gpu preset) but for the
    run's size (256 envs, batch 512), 8 updates per iteration and widths 256/512, the sizes
    chosen beside the reference (presets.py; bench/RESULTS.md)."""
    gpu_train, gpu = preset_configs("SharpaInhandRotation", "hora_sac", "gpu")
    cpu_train, cpu = preset_configs("SharpaInhandRotation", "hora_sac", "cpu")
    assert (cpu_train.num_envs, cpu_train.batch_size, cpu_train.updates_per_step) == (256, 512, 8)
    assert (cpu["actor_hidden_dim"], cpu["critic_hidden_dim"]) == (256, 512)
    widths = ("actor_hidden_dim", "critic_hidden_dim")
    assert {k: v for k, v in cpu.items() if k not in widths} == {
        k: v for k, v in gpu.items() if k not in widths
    }
    rules = ("physics", "replay_buffer_n", "policy_frequency", "env_steps_per_sync")
    assert [getattr(cpu_train, f) for f in rules] == [getattr(gpu_train, f) for f in rules]


def test_given_values_win_over_the_preset():
    config, algo = preset_configs(
        "playground/CartpoleBalance",
        "td3",
        "cpu",
        train={"num_envs": 32},
        algo_settings={"gamma": 0.9},
    )
    assert (config.num_envs, config.batch_size, config.updates_per_step) == (32, 512, 8)
    assert algo == {
        "gamma": 0.9,
        "actor_hidden_dim": 256,
        "critic_hidden_dim": 256,
        "noise_correlation": 0.95,
    }
    bare, bare_algo = preset_configs("playground/CartpoleBalance", "sac", "none")
    assert bare == TrainConfig(env="playground/CartpoleBalance") and bare_algo == {}


@pytest.mark.parametrize("key", sorted(_PRESETS))
@pytest.mark.parametrize("algo", ["sac", "td3", "flash_sac"])
def test_every_preset_is_a_valid_configuration(key, algo):
    preset = _PRESETS[key]
    config = TrainConfig(**preset.train_settings(algo), algo=algo)
    config.validate()
    spec = get_algo(algo)
    spec.config_cls(**preset.algo_settings(algo)).validate()
    line = preset_line(preset, algo, given={"num_envs"})
    assert line.startswith(f"preset {preset.name}: ") and "num_envs" not in line


def test_flash_sac_runs_its_papers_recipe_on_an_accelerator_and_sacs_sizes_on_a_cpu():
    recipe = dict(num_envs=1024, batch_size=2048, updates_per_step=2)
    for env in ("playground/CheetahRun", "Go1JoystickFlat", "playground/G1JoystickFlatTerrain"):
        gpu, _ = preset_configs(env, "flash_sac", "gpu")
        assert {k: getattr(gpu, k) for k in recipe} == recipe, env
        sac, _ = preset_configs(env, "sac", "gpu")
        assert sac.batch_size != gpu.batch_size
        cpu, algo = preset_configs(env, "flash_sac", "cpu")
        sac_cpu = preset_configs(env, "sac", "cpu")[0]
        assert cpu == dataclasses.replace(sac_cpu, algo="flash_sac"), env
        dmc = {"critic_hidden_dim": 128, "tau": 0.1, "reward_scaling": False, "alpha_init": 1e-3}
        assert algo == (dmc if env == "playground/CheetahRun" else {})


def cli_configs(*argv: str):
    from unilab_jax.cli.train import parse_args

    return parse_args(list(argv))[1:]


def test_the_cli_applies_the_preset_and_the_options_given_win(tmp_path, monkeypatch):
    config, algo, line = cli_configs(
        "--env",
        "playground/CartpoleBalance",
        "--preset",
        "cpu",
        "--num-envs",
        "64",
        "--gamma",
        "0.9",
    )
    assert (config.num_envs, config.batch_size, config.updates_per_step) == (64, 512, 8)
    assert algo == {"gamma": 0.9, "actor_hidden_dim": 256, "critic_hidden_dim": 256}  # sac
    assert line.startswith("preset dm_control/cpu: ") and "batch_size=512" in line
    assert "num_envs" not in line and "gamma" not in line  # given: not the preset's
    # --preset none: the bare defaults; no preset for a task of no family.
    bare, bare_algo, none = cli_configs("--env", "playground/CartpoleBalance", "--preset", "none")
    assert (
        bare == TrainConfig(env="playground/CartpoleBalance") and bare_algo == {} and none is None
    )
    # --config FILE reruns the recorded settings, presets aside.
    saved = tmp_path / "run_config.json"
    saved.write_text('{"train": {"env": "CheetahRun", "num_envs": 32}, "algo": {}}')
    rerun, _, line = cli_configs("--config", str(saved), "--preset", "cpu")
    assert (rerun.num_envs, rerun.batch_size) == (32, TrainConfig().batch_size)
    assert line == f"Settings: the ones {saved} records (options given win)"
    monkeypatch.setenv("UNILAB_JAX_PRESET", "big")
    with pytest.raises(ConfigError, match="UNILAB_JAX_PRESET='big': choose one of auto, cpu"):
        cli_configs("--env", "CheetahRun")
