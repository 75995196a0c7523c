"""``unilab-jax export``: real tiny runs exported, loaded back with the plain
libraries (torch, TorchScript, onnxruntime) and compared with the JAX policy."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from tiny import TINY, TINY_SAC  # tests/tiny.py

import unilab_jax
from unilab_jax.cli import export as export_cli
from unilab_jax.policy import export, load_policy
from unilab_jax.training.trainer import train

torch = pytest.importorskip("torch", reason=f"needs torch: {export.EXPORT_EXTRA}")

# tests/tiny.py's run (its compiled programs come from the persistent compile cache). SAC runs
# 12 iterations, checkpoints at 6 and 12: its zero-initialised mean head needs a few actor
# updates before the actions depend on the observation clearly (the normaliser test). TD3 (a
# random head, so 4 iterations do) has one checkpoint at iteration 4.
SAC_TINY = TINY.replace(max_iterations=12, save_interval=6)
TD3_TINY = TINY.replace(algo="td3", max_iterations=4, save_interval=4)
ATOL = export.TOLERANCE

# torch 2.13 marks TorchScript deprecated (in favour of torch.export); the format still works.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("export") / "sac"
    train(SAC_TINY, TINY_SAC, log_dir=run, logger="none", quiet=True)
    return run


@pytest.fixture(scope="module")
def td3_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("export") / "td3"
    train(TD3_TINY, TINY_SAC, log_dir=run, logger="none", quiet=True)
    return run


@pytest.fixture(scope="module")
def sac_policy(sac_run):
    return load_policy(sac_run)  # the newest checkpoint, iteration 12


@pytest.fixture(scope="module")
def td3_policy(td3_run):
    return load_policy(td3_run)


def observations(policy, n=300, seed=1):
    """Random observations around the normaliser's statistics (wider than its std)."""
    normalizer = policy.state.obs_normalizer
    mean, std = np.asarray(normalizer.mean), np.sqrt(np.asarray(normalizer.var))
    rng = np.random.default_rng(seed)
    return (mean + rng.standard_normal((n, policy.obs_dim)) * (3.0 * std + 0.5)).astype(np.float32)


def run_plain(fmt, path, obs):
    """``(actions, metadata)`` of an exported file, read with the plain library only."""
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime", reason=export.EXPORT_EXTRA)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["obs"]
        assert session.get_inputs()[0].shape[0] == "batch"  # the dynamic batch axis
        assert [o.name for o in session.get_outputs()] == ["action"]
        props = session.get_modelmeta().custom_metadata_map
        assert props["task"] == "PendulumSwingup"
        (actions,) = session.run(["action"], {"obs": obs})
        return actions, json.loads(props["metadata.json"])
    if fmt == "torchscript":
        extra = {"metadata.json": ""}
        module = torch.jit.load(str(path), _extra_files=extra)
        with torch.no_grad():
            return module(torch.from_numpy(obs)).numpy(), json.loads(extra["metadata.json"])
    saved = torch.load(path, weights_only=True)  # plain tensors, dicts and scalars only
    assert set(saved) == {"format", "state_dict", "architecture", "metadata"}
    assert saved["state_dict"]["actor.fc_mu.weight"].shape == (1, 4)  # torch's [out, in]
    module, metadata = export.load_exported(path)
    assert metadata == saved["metadata"]
    return module(torch.from_numpy(obs)).numpy(), metadata


def check_metadata(metadata, policy, fmt, iteration):
    assert metadata["format"] == fmt
    assert metadata["task"] == "PendulumSwingup" == policy.env
    assert metadata["algorithm"] == policy.algo
    assert metadata["iteration"] == iteration == policy.iteration
    assert metadata["obs_dim"] == 3 and metadata["action_dim"] == 1
    assert metadata["observation"]["obs_dim"] == 3
    assert metadata["observation"]["documented_in"] == "unilab_jax.envs.pendulum.PendulumSwingup"
    assert metadata["normalizer"]["included"] is True
    assert metadata["normalizer"]["count"] > 0
    assert metadata["normalizer"]["epsilon"] == 1e-2
    assert metadata["action_scaling"]["kind"] == "identity"  # the pendulum takes ctrl = action
    assert metadata["output"]["range"] == [-1.0, 1.0]
    assert metadata["unilab_jax_version"] == unilab_jax.__version__
    assert metadata["config"] == json.loads(json.dumps(policy.config))


def printed_difference(out: str) -> float:
    (line,) = [line for line in out.splitlines() if line.startswith("checked:")]
    return float(line.split("= ")[1].split()[0])


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        export_cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--format", "--out", "--step", "--samples", "torch", "torchscript", "onnx"):
        assert flag in text, flag
    assert "unilab-jax[export]" in text
    # every option carries a description, not just a name (its field's docstring)
    import typing

    from unilab_jax.cli.options import STEP_HELP, documented

    options = documented(export_cli.Export, step=STEP_HELP)
    for name, hint in typing.get_type_hints(options, include_extras=True).items():
        (arg,) = [m for m in hint.__metadata__ if hasattr(m, "help")]
        assert len(arg.help) > 12 and arg.help[:30] in text, name


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_sac_exports_load_with_the_plain_library_and_match_the_policy(
    fmt, sac_run, sac_policy, tmp_path, capsys
):
    out = tmp_path / f"policy.{fmt}"
    assert export_cli.main([str(sac_run), "--format", fmt, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out} ({fmt}," in printed and "normaliser included" in printed
    assert printed_difference(printed) <= ATOL
    obs = observations(sac_policy)
    actions, metadata = run_plain(fmt, out, obs)
    expected = sac_policy(obs)
    assert actions.shape == expected.shape == (300, 1)
    np.testing.assert_allclose(actions, expected, rtol=0, atol=ATOL)
    assert np.abs(expected).max() > 1e-4  # the comparison is not of zeros
    check_metadata(metadata, sac_policy, fmt, 12)


def test_td3_onnx_export_matches_the_policy(td3_run, td3_policy, tmp_path, capsys):
    out = tmp_path / "nested" / "td3.onnx"
    assert export_cli.main([str(td3_run), "--format", "onnx", "--out", str(out)]) == 0
    assert printed_difference(capsys.readouterr().out) <= ATOL
    obs = observations(td3_policy)
    actions, metadata = run_plain("onnx", out, obs)
    np.testing.assert_allclose(actions, td3_policy(obs), rtol=0, atol=ATOL)
    check_metadata(metadata, td3_policy, "onnx", 4)
    # The network is the algorithm's own torch actor, the facade learner's class.
    assert metadata["network"]["algorithm"] == "td3"
    assert metadata["network"]["actor"]["hidden_dim"] == 16  # tests/tiny.py's TINY_SAC
    assert metadata["policy"].startswith("The deterministic action ``tanh(mu(obs))``")
    # A batch of one and a larger batch through the same dynamic axis.
    for n in (1, 1000):
        batch = observations(td3_policy, n=n, seed=n)
        np.testing.assert_allclose(
            run_plain("onnx", out, batch)[0], td3_policy(batch), rtol=0, atol=ATOL
        )


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_the_normaliser_is_inside_the_export(algo, request, tmp_path):
    policy = request.getfixturevalue(f"{algo}_policy")
    normalizer = policy.state.obs_normalizer
    # The trained run's statistics are far from the identity (mean 0, var 1).
    assert float(normalizer.count) > 0
    assert np.abs(np.asarray(normalizer.mean)).max() > 0.05
    assert np.abs(np.asarray(normalizer.var) - 1.0).max() > 0.2
    out = export.export_policy(policy, "torchscript", tmp_path / "policy.ts")
    obs = observations(policy)
    exported, _ = run_plain("torchscript", out, obs)
    np.testing.assert_allclose(exported, policy(obs), rtol=0, atol=ATOL)
    # The same network and weights without the normaliser act differently, by more than the
    # check's tolerance: an export that dropped it would fail verification.
    architecture, tensors = export.actor_structure(policy)
    bare = export.build_module(
        {**architecture, "normalize": False}, {k: torch.from_numpy(v) for k, v in tensors.items()}
    )
    without = bare(torch.from_numpy(obs)).numpy()
    assert np.abs(exported - without).max() > 3 * ATOL


def test_verification_fails_on_an_export_that_lost_its_normaliser(sac_policy, tmp_path):
    path = export.export_policy(sac_policy, "torch", tmp_path / "policy.pt")
    assert export.verify_export(sac_policy, path, "torch") <= ATOL
    saved = torch.load(path, weights_only=True)
    saved["state_dict"]["obs_mean"].zero_()
    saved["state_dict"]["obs_std"].fill_(1.0 - 1e-2)
    torch.save(saved, path)
    with pytest.raises(export.ExportVerificationError, match="differs from the JAX policy"):
        export.verify_export(sac_policy, path, "torch")


def test_a_policy_with_non_finite_weights_is_never_exported(sac_policy, tmp_path):
    """A diverged run's weights (one NaN is enough) are refused before anything is written:
    the check on random observations could pass where the NaN is masked."""
    import dataclasses

    import jax

    leaves, treedef = jax.tree.flatten(sac_policy.state)
    first = next(i for i, x in enumerate(leaves) if np.issubdtype(np.asarray(x).dtype, np.floating))
    leaves[first] = np.full_like(np.asarray(leaves[first]), np.nan)
    broken = dataclasses.replace(sac_policy, state=jax.tree.unflatten(treedef, leaves))
    with pytest.raises(export.ExportError, match="weights are not finite.*nothing was exported"):
        export.export_policy(broken, "torch", tmp_path / "policy.pt")
    assert not list(tmp_path.iterdir())


def test_export_policy_checks_before_the_file_is_in_place(sac_policy, tmp_path, monkeypatch):
    """A file that misses the tolerance (its normaliser's statistics lost in writing), or any
    other failure during the check, never reaches ``out``: an earlier file there stays as it
    was and no temporary file is left."""
    out = tmp_path / "policy.pt"
    out.write_bytes(b"an earlier export")
    structure = export.actor_structure

    def lose_the_normaliser(policy):
        architecture, tensors = structure(policy)
        return architecture, {**tensors, "obs_mean": np.zeros_like(tensors["obs_mean"])}

    monkeypatch.setattr(export, "actor_structure", lose_the_normaliser)
    with pytest.raises(
        export.ExportVerificationError,
        match=f"{out} .torch. differs from the JAX policy.*; {out} was not written",
    ):
        export.export_policy(sac_policy, "torch", out)
    assert out.read_bytes() == b"an earlier export" and sorted(tmp_path.iterdir()) == [out]
    monkeypatch.setattr(export, "actor_structure", structure)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "verify_export", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export.export_policy(sac_policy, "onnx", tmp_path / "policy.onnx")
    assert sorted(tmp_path.iterdir()) == [out]
    monkeypatch.undo()
    assert export.export_policy(sac_policy, "torch", out) == out
    assert export.verify_export(sac_policy, out, "torch") <= ATOL


def test_unknown_format_is_a_clear_error(sac_policy, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        export_cli.main([str(tmp_path), "--format", "tflite", "--out", str(tmp_path / "p")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice 'tflite' for argument '--format'" in err
    assert all(name in err for name in ("torch", "torchscript", "onnx"))
    with pytest.raises(export.ExportError, match="choose one of torch, torchscript, onnx"):
        export.export_policy(sac_policy, "tflite", tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_a_run_without_checkpoints_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    out = tmp_path / "p.onnx"
    assert export_cli.main([str(tmp_path / "run"), "--format", "onnx", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no checkpoint under") and "Traceback" not in err
    assert export_cli.main([str(tmp_path / "missing"), "--format", "torch", "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_package_names_the_extra(tmp_path, monkeypatch, capsys):
    # None in sys.modules is how Python marks a module unimportable (import raises).
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    out = tmp_path / "p.onnx"
    assert export_cli.main([str(tmp_path), "--format", "onnx", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--format onnx needs onnxruntime" in err
    assert "pip install 'unilab-jax[export]'" in err
    assert not out.exists()


def test_step_exports_an_older_checkpoint(sac_run, sac_policy, tmp_path, capsys):
    out = tmp_path / "policy6.pt"
    assert (
        export_cli.main([str(sac_run), "--format", "torch", "--out", str(out), "--step", "6"]) == 0
    )
    assert "at iteration 6" in capsys.readouterr().out
    older = load_policy(sac_run, step=6)
    obs = observations(older)
    actions, metadata = run_plain("torch", out, obs)
    np.testing.assert_allclose(actions, older(obs), rtol=0, atol=ATOL)
    assert metadata["iteration"] == 6
    assert np.abs(actions - sac_policy(obs)).max() > 3 * ATOL  # not the newest policy
    with pytest.raises(FileNotFoundError, match=r"no checkpoint 7 under .* \(saved: 6, 12\)"):
        load_policy(sac_run, step=7)


def test_the_export_wraps_the_algorithms_one_torch_actor(sac_policy, td3_policy, tmp_path):
    """One torch actor per algorithm: the exported module's actor is the class the facade's
    learner trains (``AlgoSpec.torch_actor``), and a file of the older layout is refused with
    the fix named."""
    from unilab.algos.torch.fast_sac import SACActor
    from unilab.algos.torch.fast_td3.learner import FastTD3Learner, TD3Actor

    assert type(export.to_torch_module(sac_policy).actor) is SACActor
    module = export.to_torch_module(td3_policy)
    assert type(module.actor) is TD3Actor
    learner = FastTD3Learner(3, 1, actor_hidden_dim=16)
    assert type(learner.actor) is TD3Actor
    assert learner.actor.state_dict().keys() == module.actor.state_dict().keys()
    old = tmp_path / "old.pt"
    torch.save({"format": "unilab_jax.export/torch-v1", "state_dict": {}}, old)
    with pytest.raises(export.ExportError, match="torch-v1 export of an earlier.*export the run"):
        export.load_exported(old)


def test_a_robots_joint_targets_are_recorded_as_an_affine_clip():
    """Go1's ``ctrl_from_action`` (joint position targets around the default pose) is what
    the metadata's ``affine_clipped`` formula says, at the default pose and at the bounds."""
    _, scaling, data = export.env_description("Go1JoystickFlat", None, 48, 12)
    assert data is None  # a locomotion task is built from no data
    assert scaling["kind"] == "affine_clipped" and scaling["action_scale"] == 0.3
    bias, lo, hi = (np.array(scaling[k]) for k in ("action_bias", "ctrl_min", "ctrl_max"))
    assert bias.shape == lo.shape == hi.shape == (12,)
    assert np.all(lo < bias) and np.all(bias < hi)
    np.testing.assert_allclose(bias[:3], [0.0, 0.9, -1.8], atol=1e-6)  # hip, thigh, calf
