"""StoredModel: a model found in the hub, with its tags as attributes (TensorHub's
``net._test_accuracy`` spelling too), its architecture and its weights."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, Optional

import numpy as np

from . import _convert, _torchscript


class StoredModel:
    """A model document of the hub: ``id``, ``time`` (UTC datetime), ``project_name``,
    ``model_name``, ``tags`` (a dict; each tag is also an attribute, plain or with a leading
    underscore as TensorHub's ``net._test_accuracy``), ``architecture`` (model.json as a dict)
    and ``weights`` (name -> numpy array, read from the hub on first use); torchscript() gives
    the TorchScript module of a PyTorch model, where it has one."""

    def __init__(self, hub: Any, document_text: str, architecture_text: Optional[str] = None,
                 weights: Optional[Dict[str, np.ndarray]] = None) -> None:
        document = _convert.from_json_text(document_text)
        self._hub = hub
        self._document_text = document_text
        self.id: int = document["id"]
        self.project_name: str = document["project_name"]
        self.time: _dt.datetime = _convert.time_of(document["time"])
        self.tags: Dict[str, Any] = document["tags"]
        self.model_name: str = self.tags.get("model_name", "")
        self._parts: Dict[str, str] = document.get("parts", {})
        self._architecture = None if architecture_text is None else _convert.from_json_text(architecture_text)
        self._weights = weights

    def _load(self) -> None:
        architecture_text, self._weights = self._hub._core.load_model(self._document_text)
        self._architecture = _convert.from_json_text(architecture_text)

    @property
    def architecture(self) -> Dict[str, Any]:
        """model.json as a dict (for a PyTorch module saved from Python: its class name)."""
        if self._architecture is None:
            self._load()
        return self._architecture

    @property
    def weights(self) -> Dict[str, np.ndarray]:
        """The weights as name -> numpy array (read once, verified by SHA-256)."""
        if self._weights is None:
            self._load()
        return self._weights

    def state_dict(self) -> Dict[str, Any]:
        """The weights as a state_dict: torch tensors (sharing the numpy arrays' memory) when
        torch can be imported, numpy arrays otherwise."""
        try:
            import torch
        except ImportError:
            return dict(self.weights)
        return {name: torch.from_numpy(array) for name, array in self.weights.items()}

    @property
    def has_torchscript(self) -> bool:
        """True when the model has a TorchScript part ("model.pt"): saved from a torch.nn.Module
        that could be scripted or traced, or by ``tensorhub model save --path model.pt``. Such
        a model is what ``tensorhub serve --hub_model`` can serve when model.json holds no
        layers of tensorhub's own."""
        return _torchscript.PART in self._parts

    def torchscript(self) -> Any:
        """The model's TorchScript module (a torch.jit.ScriptModule, loaded onto the CPU from
        its "model.pt" part with torch.jit.load; in eval mode when saved by save_model), or
        None when the model has none (see has_torchscript). Raises DataLoss when the part
        fails verification."""
        if not self.has_torchscript:
            return None
        data = self._hub._core.load_model_part(self._document_text, _torchscript.PART)
        return None if data is None else _torchscript.load(data)

    def load_into(self, module: Any, strict: bool = True) -> Any:
        """Loads the weights into the torch.nn.Module `module` (its load_state_dict, with
        `strict`); returns what load_state_dict returns (missing and unexpected keys)."""
        import torch

        state = {name: torch.from_numpy(np.array(a, copy=True)) for name, a in self.weights.items()}
        return module.load_state_dict(state, strict=strict)

    def __getattr__(self, name: str) -> Any:
        tags = self.__dict__.get("tags", {})
        if name in tags:
            return tags[name]
        if name.startswith("_") and name[1:] in tags:
            return tags[name[1:]]
        raise AttributeError(f"model {self.__dict__.get('id')} has no tag or attribute {name!r}")

    def __repr__(self) -> str:
        return f"StoredModel(id={self.id}, model_name={self.model_name!r}, tags={self.tags!r})"
