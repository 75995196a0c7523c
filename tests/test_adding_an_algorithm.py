"""docs/layout.md's "adding an algorithm" holds: one registry row (tests/toy_algo.py's DDPG, its
config class, maker and torch actor) is all the core needs to train it from Python and from
the command line's parser, checkpoint it, load its policy and export it, checked."""

from __future__ import annotations

import numpy as np
import pytest
import toy_algo  # tests/toy_algo.py
from tiny import TINY, TINY_SAC  # tests/tiny.py

from unilab_jax.algos import registry

torch = pytest.importorskip("torch", reason="export needs torch")


@pytest.fixture
def with_ddpg(monkeypatch):
    monkeypatch.setitem(registry.ALGOS, "ddpg", toy_algo.SPEC)


def test_one_registry_row_trains_checkpoints_loads_and_exports_a_new_algorithm(
    with_ddpg, tmp_path, capsys
):
    from unilab_jax.cli.train import main, parse_args
    from unilab_jax.policy import load_policy
    from unilab_jax.policy.export import export_policy, verify_export
    from unilab_jax.training.trainer import train

    # The command line knows it: --algo ddpg parses, its options are its config's fields.
    _, config, algo, _ = parse_args(["--algo", "ddpg", "--preset", "none", "--tau", "0.01"])
    assert (config.algo, algo) == ("ddpg", {"tau": 0.01})
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "ddpg (DDPG)" in text and "{sac,td3,flash_sac,hora_sac,ddpg}" in text  # the registry's

    run = tmp_path / "ddpg"
    result = train(TINY.replace(algo="ddpg", save_interval=6), TINY_SAC, log_dir=run,
                   logger="none", quiet=True)  # fmt: skip
    assert result.summary["completed_iterations"] == 6
    policy = load_policy(run)
    assert (policy.algo, policy.iteration) == ("ddpg", 6)
    config = policy.algo_config
    assert type(config) is toy_algo.DDPGConfig and not config.use_cdq
    obs = np.zeros((4, policy.obs_dim), np.float32)
    assert policy(obs).shape == (4, 1)
    out = export_policy(policy, "torch", tmp_path / "ddpg.pt")
    assert verify_export(policy, out, "torch") <= 1e-5
