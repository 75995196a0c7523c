"""The command-line programs, apart from the library they call.

Each is started as ``python -m unilab_jax.<name>`` (a module of that name hands over to the
program here) and does only what a command line needs: parse and check its options, call the
library, print, and map failures to exit codes (2 bad input, 1 a failed save or check,
130 / 143 stopped by SIGINT / SIGTERM).

- ``train``: ``TrainConfig`` and the algorithms' configs as options (generated from their
  documented fields), presets, ``--config`` reruns, ``--resume``; calls ``trainer.train``
  (the parser and how options become settings: ``train_options``).
- ``launch``: one run over several local processes (``unilab_jax.distributed``).
- ``evaluate``: ``policy.evaluate`` of a run's checkpoint.
- ``play``: episodes and video of a trained policy (``unilab_jax.play``).
- ``export``: ``export.export_policy`` (torch, TorchScript, ONNX), checked.
- ``plot``: ``plot.plot_runs`` of TensorBoard runs.
"""
