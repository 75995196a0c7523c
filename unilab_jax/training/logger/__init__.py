"""Training loggers: Rich live dashboard plus TensorBoard (torch-free) or W&B scalars.

``OffPolicyLogger`` keeps the documented UniLab off-policy logger API. wandb is an optional
extra (``pip install 'unilab-jax[wandb]'``); it is imported only when ``log_backend="wandb"``.
"""

from unilab_jax.training.logger.common import BaseTrainingLogger, use_console
from unilab_jax.training.logger.offpolicy import OffPolicyLogger

__all__ = ["BaseTrainingLogger", "OffPolicyLogger", "use_console"]
