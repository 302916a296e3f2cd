"""The task's own side: what a task program started by a runner reads (its hyperparameters)
and how it reports (epochs, results), over the C++ TaskContext."""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional

from . import _convert, _core


class TaskContext:
    """The runner's environment of this process (TENSORHUB_URI, TENSORHUB_PROJECT,
    TENSORHUB_TASK_ID, TENSORHUB_HYPER_PARAMETERS, TENSORHUB_RESULT_FILE). Outside a runner it
    still works: no hyperparameters, results kept in memory, epochs not stored."""

    def __init__(self) -> None:
        self._core = _core.TaskContext()
        self.hyper_parameters: Dict[str, Any] = _convert.from_json_text(self._core.hyper_parameters_json())

    @property
    def task_id(self) -> int:
        """The task's id; 0 outside a runner."""
        return self._core.task_id

    @property
    def under_runner(self) -> bool:
        """True when a runner started this process."""
        return self._core.under_runner

    @property
    def hub_uri(self) -> str:
        """The hub the runner works on (TENSORHUB_URI), else the default hub."""
        return self._core.hub_uri

    @property
    def project_name(self) -> str:
        """The task's project (TENSORHUB_PROJECT), else "default"."""
        return self._core.project_name

    @property
    def results(self) -> Dict[str, Any]:
        """The results set so far."""
        return _convert.from_json_text(self._core.results_json())

    def get(self, name: str, default: Any = None) -> Any:
        """The hyperparameter `name`, or `default` when the task has none of that name."""
        return self.hyper_parameters.get(name, default)

    def set_result(self, **values: Any) -> None:
        """Records results (JSON values; numpy scalars are converted), e.g.
        ``set_result(test_accuracy=0.87)``; the runner finishes the task only when every
        saved_result_key is set. Raises InvalidArgument for a value that is not JSON,
        Unavailable when the result file cannot be written."""
        encoded = {key: _convert.value_to_json_text(value, f"result {key!r}") for key, value in values.items()}
        for key, text in encoded.items():
            self._core.set_result(key, text)

    def report_epoch(self, epoch: int, logs: Optional[Mapping[str, Any]] = None, **metrics: Any) -> None:
        """Stores epoch `epoch` (0-based, as Keras's on_epoch_end) with its metrics, given as
        `logs` and/or keywords, e.g. ``report_epoch(3, loss=0.41, val_accuracy=0.85)``, so
        ``tensorhub task list|show|wait`` and tuners follow the training. Does nothing outside a
        runner. Raises InvalidArgument for non-JSON metrics, NotFound without hub or task."""
        merged = dict(logs or {})
        merged.update(metrics)
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise _core.InvalidArgument(f"epoch {epoch!r} is not an int")
        self._core.report_epoch(epoch, _convert.to_json_text(merged, "epoch logs"))


_context: Optional[TaskContext] = None
_context_lock = threading.Lock()


def task_context() -> TaskContext:
    """This process's TaskContext (made on the first call, then the same object)."""
    global _context
    with _context_lock:
        if _context is None:
            _context = TaskContext()
        return _context
