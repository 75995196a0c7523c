"""A script written against the reference UniLab's documented API runs on our facade.

The script is the one `docs/moving_from_unilab.md` shows (its block after the
`<!-- moving-from-unilab-script -->` marker), run as a user runs it: a fresh Python process
(its collectors are spawned, so it needs its `__main__` guard), at the doc's tiny sizes on
`PendulumSwingup` with `sim_backend="mujoco"`. It trains FastTD3, FastSAC and FlashSAC (as the
reference's `"flashsac"`) for 3 iterations each through `OffPolicyRunner`, then drives the TD3
learner by hand with `OffPolicyLogger`, all with the reference's argument names.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

pytestmark = pytest.mark.timeout(600)

DOC = Path(__file__).resolve().parents[2] / "docs" / "moving_from_unilab.md"
MARKER = "<!-- moving-from-unilab-script -->"


def doc_script() -> str:
    """The python block that follows the marker in the doc."""
    text = DOC.read_text()
    after = text.split(MARKER, 1)[1].lstrip()
    assert after.startswith("```python\n"), "the marker must precede a python block"
    return after.removeprefix("```python\n").split("\n```", 1)[0] + "\n"


def test_the_docs_reference_style_script_trains_and_logs_on_our_facade(tmp_path):
    script = tmp_path / "reference_script.py"
    script.write_text(doc_script())
    logs = tmp_path / "logs"
    proc = subprocess.run(
        [sys.executable, str(script), str(logs)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for algo_type in ("td3", "sac", "flashsac"):
        checkpoint = logs / algo_type / "model_3.pt"
        assert f"{algo_type}: trained, {checkpoint}" in proc.stdout
        state = torch.load(checkpoint, weights_only=False)
        assert state["update_count"] == 3 * 2  # 3 iterations of 2 updates
    # By hand: 4 critic updates on top of the 6 of the run.
    assert "td3 by hand: update_count 10" in proc.stdout
    events = EventAccumulator(str(logs / "by_hand"))
    events.Reload()
    assert {"train/qf_loss", "train/actor_loss", "perf/steps_per_sec"} <= set(
        events.Tags()["scalars"]
    )
    assert [e.step for e in events.Scalars("train/qf_loss")] == [8, 16, 24, 32]
