"""tensorhub for Python: TensorLayer TensorHub's API over tensorhub's C++ hub.

One database (SQLite file or PostgreSQL server) holds datasets, models, training logs and a
task queue; the C++ command line (``tensorhub``), runners and the dashboard share it::

    import tensorhub
    db = tensorhub.TensorHub("sqlite:///tmp/hub.db", project_name="mnist")
    db.save_dataset((X_train, y_train, X_val, y_val, X_test, y_test), "mnist", description="...")
    X_train, y_train, X_val, y_val, X_test, y_test = db.find_top_dataset("mnist")
    db.save_model(net, "mlp", test_accuracy=0.87)            # a torch.nn.Module or dict of arrays
    best = db.find_top_model("mlp", sort=[("test_accuracy", -1)])
    best.load_into(net); print(best._test_accuracy)
    db.create_task("train", command="python3 train.py", hyper_parameters={"n_units": 800},
                   saved_result_keys=["test_accuracy"])
    while db.check_unfinished_task("train"): time.sleep(1)

Sharded (TFRecord) datasets, made by ``tensorhub dataset import --tfrecord``, are read batch
by batch as dicts of numpy arrays: ``for batch in tensorhub.data.from_hub(db, "fmnist-train",
batch_size=256, shuffle=10000, seed=1): ...`` (tensorhub.data).

In a task started by a runner: ``ctx = tensorhub.task_context()``; ``ctx.hyper_parameters``,
``ctx.report_epoch(epoch, loss=...)``, ``ctx.set_result(test_accuracy=...)``.

Errors are tensorhub.Error subclasses (InvalidArgument, NotFound, AlreadyExists,
FailedPrecondition, Unavailable, DataLoss, Internal, DeadlineExceeded), with the C++ core's
messages.
"""

try:
    from ._core import (AlreadyExists, DataLoss, DeadlineExceeded, Error, FailedPrecondition, Internal,
                        InvalidArgument, NotFound, Unavailable)
except ModuleNotFoundError as e:  # a source tree whose build did not make the C++ module
    if e.name != __name__ + "._core":
        raise
    raise ImportError("tensorhub's C++ module (tensorhub._core) is not built here: in the source tree run "
                      "`scripts/build tensorhub_python_core` (a plain `scripts/build` makes it too; "
                      "`scripts/demo` builds only the demo's programs), or `pip install .`") from e
from ._hub import TensorHub
from ._model import StoredModel
from ._task import TaskContext, task_context
from . import data

__version__ = "0.1.0"

__all__ = [
    "TensorHub", "StoredModel", "TaskContext", "task_context", "Error", "InvalidArgument", "NotFound",
    "AlreadyExists", "FailedPrecondition", "Unavailable", "DataLoss", "Internal", "DeadlineExceeded",
    "__version__",
]
