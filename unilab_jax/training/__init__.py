"""A training run from start to end: ``trainer`` (``Trainer``, ``train``), the host loop over
device blocks (``host_loop``), the run's settings and where its records go (``run_settings``,
``run_sinks``, ``records``, ``sinks``, the live panel and TensorBoard/W&B writer ``logger``),
its folder and lock (``rundir``), checkpoints (``checkpoint``) and resuming (``resume``),
signals (``interrupts``), the presets of sizes per task family and machine (``presets``), and
``facade``: the facade's (``unilab/``) one entrance to all of it."""
