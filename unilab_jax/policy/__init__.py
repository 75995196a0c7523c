"""After training: a run's policy loaded (``load``), evaluated (``evaluate``), watched
(``play``, ``video``, ``gl_backends``) and exported (``export``)."""

from unilab_jax.policy.evaluate import EvalResult, evaluate
from unilab_jax.policy.load import (
    Policy,
    PolicyReader,
    agent_template,
    find_checkpoint,
    load_policy,
    register_reader,
)

__all__ = [
    "EvalResult",
    "Policy",
    "PolicyReader",
    "agent_template",
    "evaluate",
    "find_checkpoint",
    "load_policy",
    "register_reader",
]
