"""The three file formats, written and read back: torch, TorchScript, ONNX.

- ``write_file``: an export's module, state dict, architecture and metadata written as
  ``torch.save({"format", "state_dict", "architecture", "metadata"})``, as a
  ``torch.jit.script`` archive with ``metadata.json`` as an extra file, or through the dynamo
  ONNX exporter with the metadata as ``metadata_props`` (``_export_onnx``);
- ``load_exported``: a torch or TorchScript file back as ``(module, metadata)``;
  ``run_exported``: any of the three run with its plain library (``torch.load``,
  ``torch.jit.load``, ``onnxruntime``), as the check after every export does.

Torch, onnx and onnxruntime are imported inside the functions only. ``unilab_jax.policy.export``
describes the formats for their users.
"""

from __future__ import annotations

import json
import logging
import warnings
import zipfile
from pathlib import Path
from typing import Any

from unilab_jax.policy.export.common import ExportError, check_format
from unilab_jax.policy.export.module import build_module

__all__ = ["load_exported", "run_exported"]

_TORCH_FORMAT = "unilab_jax.export/torch-v2"
# v1 (before the exporter used the algorithms' own actors) held another module layout.
_OLD_TORCH_FORMATS = ("unilab_jax.export/torch-v1",)
_METADATA_FILE = "metadata.json"


def write_file(
    fmt: str, out: Path, module: Any, state_dict: dict, architecture: dict, metadata: dict
) -> None:
    """``module`` (built from ``architecture`` and ``state_dict``) written to ``out`` in
    format ``fmt`` with ``metadata``, unchecked."""
    import torch

    if fmt == "torch":
        torch.save(
            {
                "format": _TORCH_FORMAT,
                "state_dict": state_dict,
                "architecture": architecture,
                "metadata": metadata,
            },
            out,
        )
    elif fmt == "torchscript":
        scripted = torch.jit.script(module)
        torch.jit.save(scripted, str(out), _extra_files={_METADATA_FILE: json.dumps(metadata)})
    else:
        _export_onnx(module, metadata, out)


def _export_onnx(module: Any, metadata: dict, out: Path) -> None:
    import onnx
    import torch

    example = torch.zeros((2, metadata["obs_dim"]), dtype=torch.float32)
    # The exporter logs that torchvision's operators are not registered (we use none) and
    # torch.export warns about its own deprecated internals: noise for this small network.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.onnx.export(
                module,
                (example,),
                str(out),
                input_names=["obs"],
                output_names=["action"],
                dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
                dynamo=True,
                external_data=False,
                verbose=False,
            )
    finally:
        registration.setLevel(level)
    model = onnx.load(str(out))
    props = {_METADATA_FILE: json.dumps(metadata)}
    for key, value in metadata.items():
        if isinstance(value, str | int | float | bool):
            props[key] = str(value)
    onnx.helper.set_model_props(model, props)
    model.doc_string = (
        f"unilab_jax {metadata['algorithm_name']} policy of {metadata['task']} (iteration "
        f"{metadata['iteration']}): obs [batch, {metadata['obs_dim']}] raw -> action [batch, "
        f"{metadata['action_dim']}] in [-1, 1]; metadata_props['{_METADATA_FILE}'] has the rest"
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def _is_torchscript(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/code/" in name for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def load_exported(path: str | Path) -> tuple[Any, dict]:
    """``(module, metadata)`` of a ``torch`` or ``torchscript`` export (torch only, no JAX):
    the torch format's ``nn.Module`` is rebuilt from its state dict and architecture, a
    TorchScript archive is ``torch.jit.load``-ed with its ``metadata.json``. ONNX files are
    run with ``onnxruntime.InferenceSession`` instead (see ``run_exported``)."""
    import torch

    path = Path(path)
    if _is_torchscript(path):
        extra = {_METADATA_FILE: ""}
        module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
        return module.eval(), json.loads(extra[_METADATA_FILE])
    saved = torch.load(path, map_location="cpu", weights_only=True)
    written = saved.get("format") if isinstance(saved, dict) else None
    if written in _OLD_TORCH_FORMATS:
        raise ExportError(
            f"{path} is a {written} export of an earlier unilab_jax; this version reads "
            f"{_TORCH_FORMAT}: export the run again (unilab-jax export RUN ...)"
        )
    if written != _TORCH_FORMAT:
        raise ExportError(f"{path} is not a unilab_jax torch export ({_TORCH_FORMAT})")
    return build_module(saved["architecture"], saved["state_dict"]), saved["metadata"]


def run_exported(path: str | Path, fmt: str, obs: Any) -> tuple[Any, dict]:
    """``(actions, metadata)``: the exported file at ``path`` loaded with its plain library
    (``torch.load`` / ``torch.jit.load`` / ``onnxruntime``) and run on ``obs`` ``[N, obs_dim]``
    (float32 numpy) -> actions ``[N, action_dim]`` as numpy."""
    import numpy as np

    check_format(fmt)
    obs = np.asarray(obs, np.float32)
    if fmt == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        props = session.get_modelmeta().custom_metadata_map
        (actions,) = session.run(["action"], {"obs": obs})
        return np.asarray(actions), json.loads(props[_METADATA_FILE])
    import torch

    module, metadata = load_exported(path)
    with torch.no_grad():
        actions = module(torch.from_numpy(obs)).numpy()
    return actions, metadata
