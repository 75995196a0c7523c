"""Training over several processes and devices: the process group and its agreements
(``processes``), a cluster's scheduler variables (``cluster``) and one run over several local
processes (``local_launch``, started by ``unilab-jax launch``)."""
