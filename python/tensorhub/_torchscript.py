"""TorchScript for save_model: a torch.nn.Module compiled so that ``tensorhub serve`` (C++,
libtorch, no Python) can run it. The bytes are what torch.jit.save writes (a zip archive),
stored as the model part "model.pt" (include/tensorhub/store/torchscript_part.h)."""

from __future__ import annotations

import io
from typing import Any, Optional, Tuple

#: The model part holding the TorchScript bytes (the C++ kTorchScriptPart).
PART = "model.pt"


def _first_line(error: BaseException) -> str:
    """The first non-empty line of `error`'s message, with its type: TorchScript's messages run
    to dozens of lines of source excerpts."""
    for line in str(error).splitlines():
        if line.strip():
            return f"{type(error).__name__}: {line.strip()}"
    return type(error).__name__


def _as_inputs(example_input: Any) -> tuple:
    """`example_input` as the tuple of positional arguments torch.jit.trace takes: a tuple
    stays one (several arguments); a tensor, numpy array or nested list becomes one tensor."""
    import torch

    if isinstance(example_input, tuple):
        return tuple(x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in example_input)
    return (example_input if isinstance(example_input, torch.Tensor) else torch.as_tensor(example_input),)


def _save(compiled: Any) -> bytes:
    buffer = io.BytesIO()
    import torch

    torch.jit.save(compiled, buffer)
    return buffer.getvalue()


def compile_module(module: Any, example_input: Any = None) -> Tuple[Optional[bytes], str, str]:
    """(bytes, method, why) for the torch.nn.Module `module`: the TorchScript bytes of
    torch.jit.script(module), or, when scripting fails and `example_input` is given, of
    torch.jit.trace(module, example_input); method is "script" or "trace". When neither
    works bytes is None, method "" and why says what failed (the first line of each error).

    The module is compiled in eval mode, then every submodule's training flag is put back:
    a trace records Dropout as it runs at trace time (in train mode it would drop at serving
    time too), and a scripted module keeps the flags it had when scripted."""
    import torch

    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        try:
            return _save(torch.jit.script(module)), "script", ""
        except Exception as e:  # TorchScript raises many types (RuntimeError, NotSupportedError, ...)
            why = f"torch.jit.script failed ({_first_line(e)})"
        if example_input is None:
            return None, "", why + " and no example_input was given to trace it with"
        try:
            with torch.no_grad():
                traced = torch.jit.trace(module, _as_inputs(example_input))
            return _save(traced), "trace", ""
        except Exception as e:
            return None, "", f"{why}, and torch.jit.trace with the example_input failed ({_first_line(e)})"
    finally:
        for m, training in flags:
            m.training = training


def load(data: bytes) -> Any:
    """The torch.jit.ScriptModule of TorchScript bytes (torch.jit.load, onto the CPU)."""
    import torch

    return torch.jit.load(io.BytesIO(data), map_location="cpu")
