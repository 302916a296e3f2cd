"""TensorHub: TensorLayer's ``tl.db.TensorHub`` API over tensorhub's C++ hub (SQLite or
PostgreSQL): datasets, models, logs and tasks of one project."""

from __future__ import annotations

import difflib
import os
import sys
import urllib.parse
import warnings
from typing import Any, Dict, List, Optional

from . import _convert, _core, _torchscript
from ._convert import Sort
from ._model import StoredModel

_TASK_KEYWORDS = ("task_name", "command", "hyper_parameters", "saved_result_keys", "script", "python", "max_attempts",
                  "timeout_s", "priority", "resources")
_LOG_COLLECTIONS = {"training": "training_logs", "validation": "validation_logs", "testing": "testing_logs"}


def _read_script(path: Any) -> Dict[str, str]:
    """The task fields of the Python file at `path`: its text and file name. Raises NotFound
    when it is not a file, InvalidArgument when it is not UTF-8 text."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise _core.NotFound(f"create_task: the script {path} does not exist") from None
    except IsADirectoryError:
        raise _core.InvalidArgument(f"create_task: the script {path} is a directory; give a .py file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _core.InvalidArgument(f"create_task: the script {path} is not UTF-8 text (byte {e.start}); "
                                    "Python source must be UTF-8") from None
    return {"script": text, "script_name": os.path.basename(path)}


def _script_project() -> Optional[str]:
    """The running script's file name without .py (TensorHub's default project), if any."""
    argv0 = sys.argv[0] if sys.argv else ""
    stem = os.path.splitext(os.path.basename(argv0))[0]
    if not stem or stem.startswith("-") or stem == "__main__":
        return None
    return stem


def _keyword_uri(ip: Optional[str], port: Optional[int], dbname: Optional[str], username: Optional[str],
                 password: Optional[str]) -> str:
    """TensorHub's keyword form as a postgresql:// URI (libpq's; %XX escapes where needed)."""
    host = ip or "localhost"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    user = ""
    if username is not None:
        user = urllib.parse.quote(str(username), safe="")
        if password is not None:
            user += ":" + urllib.parse.quote(str(password), safe="")
        user += "@"
    elif password is not None:
        raise _core.InvalidArgument("TensorHub(password=...) needs username= too")
    tail = "/" + urllib.parse.quote(str(dbname), safe="") if dbname is not None else ""
    return f"postgresql://{user}{host}:{int(port) if port is not None else 5432}{tail}"


def _resolve(uri: Optional[str], project_name: Optional[str], keywords: Dict[str, Any]) -> tuple:
    """(uri, project) from the arguments, the environment and the CLI's defaults."""
    given = {k: v for k, v in keywords.items() if v is not None}
    if given and uri is not None:
        raise _core.InvalidArgument(f"TensorHub: give either uri or {_convert.names(given)}, not both")
    if given:
        uri = _keyword_uri(**keywords)
    elif uri is None:
        uri = os.environ.get("TENSORHUB_URI") or _core.default_hub_uri()
    if project_name is None:
        env = os.environ.get("TENSORHUB_PROJECT")
        if env is not None:
            if not env:
                raise _core.InvalidArgument("TENSORHUB_PROJECT is empty: set a project name or unset it")
            project_name = env
        else:
            project_name = _script_project() or "default"
    return uri, project_name


#: Fields every document has of its own: a tag of that name would be shadowed.
_DOCUMENT_FIELDS = ("id", "time", "project_name", "parts")


def _check_tags(tags: Dict[str, Any], keywords: tuple, what: str) -> None:
    """Raises InvalidArgument naming a tag that is a document's own field, or that looks like a
    misspelt keyword of the call (e.g. ``max_attempt=`` for ``max_attempts=``), which would
    otherwise be stored silently as a tag."""
    for key in tags:
        if key in _DOCUMENT_FIELDS:
            raise _core.InvalidArgument(f'{what}: tag "{key}" is a field of every document; name it otherwise')
        near = difflib.get_close_matches(key, keywords, n=1, cutoff=0.8)
        if near:
            raise _core.InvalidArgument(f'{what}: unknown keyword "{key}" (did you mean {near[0]}=?); '
                                        "rename it if it is a tag")


def _filter(filter: Dict[str, Any], name_key: str = "", name: Optional[str] = None) -> str:
    """The filter's JSON text, with {name_key: name} when a name is given."""
    if name is not None:
        filter = dict(filter)
        filter[name_key] = name
    return _convert.to_json_text(filter, "filter")


def _documents(text: str) -> List[Dict[str, Any]]:
    """Documents (from _core's JSON) as dicts: the tags, then id, project_name and time."""
    out = []
    for doc in _convert.from_json_text(text):
        item = dict(doc["tags"])
        item.update(id=doc["id"], project_name=doc["project_name"], time=_convert.time_of(doc["time"]))
        out.append(item)
    return out


class TensorHub:
    """One project of a tensorhub hub, with TensorLayer TensorHub's methods.

    ``TensorHub(uri=None, project_name=None)``: `uri` is ``sqlite:///abs/path/hub.db`` or
    ``postgresql://user:password@host:5432/db``; by default ``$TENSORHUB_URI``, else
    ``sqlite://<working directory>/tensorhub.db`` (the command line's defaults). TensorHub's
    keyword form ``TensorHub(ip=, port=, dbname=, username=, password=)`` means PostgreSQL.
    `project_name` is by default ``$TENSORHUB_PROJECT``, else the running script's file name
    without ``.py`` (as TensorHub), else ``"default"``. The hub is created where missing.

    Every call that touches the database releases the GIL; one TensorHub may be used from
    several threads (the calls take turns on its one connection). Errors are tensorhub.Error
    subclasses: InvalidArgument, NotFound, Unavailable, DataLoss, FailedPrecondition, ...
    """

    def __init__(self, uri: Optional[str] = None, project_name: Optional[str] = None, *,
                 ip: Optional[str] = None, port: Optional[int] = None, dbname: Optional[str] = None,
                 username: Optional[str] = None, password: Optional[str] = None) -> None:
        """Opens the hub (see the class's docstring). Raises InvalidArgument for a malformed
        URI or both forms at once, Unavailable when the database cannot be reached."""
        uri, project = _resolve(uri, project_name, dict(ip=ip, port=port, dbname=dbname, username=username,
                                                         password=password))
        self._hub: Optional[_core.Hub] = _core.Hub(uri, project)

    @property
    def _core(self) -> _core.Hub:
        if self._hub is None:
            raise _core.FailedPrecondition("this TensorHub is closed")
        return self._hub

    @property
    def project_name(self) -> str:
        """The project every call reads and writes."""
        return self._core.project_name

    @property
    def uri(self) -> str:
        """The hub's URI with any password masked."""
        return self._core.display_uri

    def close(self) -> None:
        """Closes the connection; later calls raise FailedPrecondition."""
        self._hub = None

    def __enter__(self) -> "TensorHub":
        """``with TensorHub(...) as db:`` closes the connection at the end of the block."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Closes the connection."""
        self.close()

    def __repr__(self) -> str:
        return f"TensorHub({self.uri!r}, project_name={self.project_name!r})" if self._hub else "TensorHub(closed)"

    # ---- datasets ------------------------------------------------------------------------

    def save_dataset(self, dataset: Any, dataset_name: str, **tags: Any) -> int:
        """Saves `dataset` as `dataset_name` with `tags` (e.g. description=...); returns its id.

        `dataset` is a numpy array, a tuple or list of arrays (TensorHub's MNIST six-tuple
        ``(X_train, y_train, X_val, y_val, X_test, y_test)`` is stored under those names), or
        a dict of str -> array; torch tensors and nested lists are converted, non-contiguous
        arrays copied; contiguous arrays are stored straight from their memory, not copied.
        Dtypes: float32, float64, int64, int32, int8, uint8, bool. Raises InvalidArgument
        (nothing saved) for object dtype, ragged lists, other dtypes, non-str keys, non-JSON
        tags or the reserved tag "python_structure"; DataLoss (nothing saved) when another
        thread writes to one of the arrays while it is being saved."""
        if _convert.STRUCTURE_TAG in tags:
            raise _core.InvalidArgument(f'dataset tag "{_convert.STRUCTURE_TAG}" is reserved')
        _check_tags(tags, ("dataset_name",), "save_dataset")
        tensors, structure = _convert.dataset_to_tensors(dataset)
        tags_text = _convert.to_json_text({**tags, _convert.STRUCTURE_TAG: structure}, "dataset tags")
        return self._core.save_dataset(tensors, dataset_name, tags_text)

    def find_top_dataset(self, dataset_name: Optional[str] = None, sort: Sort = None, **filter: Any) -> Any:
        """The first dataset named `dataset_name` (any name when None) matching `filter`
        (MongoDB-style, e.g. ``version={"$gte": 2}``) in `sort` order (newest first when None),
        in the structure it was saved as; None when none matches. A dataset saved by the
        command line or C++ comes back as a dict of name -> array. Raises DataLoss when its
        blob fails verification, FailedPrecondition for a sharded (TFRecord) dataset."""
        if dataset_name is None:
            found = self._core.find_datasets(_filter(filter), _convert.check_sort(sort), 1)
            found = found[0] if found else None
        else:
            found = self._core.find_top_dataset(dataset_name, _filter(filter), _convert.check_sort(sort))
        if found is None:
            return None
        document = _convert.from_json_text(found[0])
        return _convert.tensors_to_dataset(found[1], document["tags"])

    def find_datasets(self, dataset_name: Optional[str] = None, sort: Sort = None, **filter: Any) -> List[Any]:
        """Every matching dataset (as find_top_dataset), newest first unless `sort` says."""
        found = self._core.find_datasets(_filter(filter, "dataset_name", dataset_name), _convert.check_sort(sort), 0)
        return [_convert.tensors_to_dataset(t, _convert.from_json_text(d)["tags"]) for d, t in found]

    def list_datasets(self, dataset_name: Optional[str] = None, sort: Sort = None, **filter: Any) -> List[Dict[str, Any]]:
        """The matching dataset documents without their tensors: each a dict of the tags with
        id, project_name and time (UTC datetime)."""
        return _documents(self._core.find_documents("datasets", _filter(filter, "dataset_name", dataset_name),
                                                    _convert.check_sort(sort), 0))

    def delete_datasets(self, dataset_name: Optional[str] = None, **filter: Any) -> int:
        """Deletes the matching datasets (all of the project when no argument) and their
        blobs no other document uses; returns how many."""
        return self._core.delete_documents("datasets", _filter(filter, "dataset_name", dataset_name))

    # ---- models --------------------------------------------------------------------------

    def save_model(self, network: Any, model_name: str, *, example_input: Any = None, **tags: Any) -> int:
        """Saves `network` as `model_name` with `tags` (e.g. test_accuracy=0.87); returns the id.

        `network` is a torch.nn.Module (its state_dict is stored as safetensors; torch is
        imported only then), a dict of str -> numpy array / torch tensor, or the path of a
        saved tensorhub model directory (model.json, weights.safetensors, and
        optimizer.safetensors and state.json where present, stored as they are).

        A torch.nn.Module is also stored as TorchScript, which ``tensorhub serve --hub_model``
        and the dashboard run without Python: torch.jit.script(network), or, when that fails,
        torch.jit.trace(network, example_input) when `example_input` is given (one batch of
        inputs: a tensor, an array, or a tuple of them for several arguments; a keyword, not a
        tag, as `model_name`). Both run in eval mode (Dropout off; the module's own mode is put
        back after). The bytes of torch.jit.save are the model part "model.pt" and the
        architecture records {"torchscript": "script"} or {"torchscript": "trace"}; read it
        back with StoredModel.torchscript(). When neither works the state_dict is saved
        without it and a UserWarning says why (such a model cannot be served).

        Raises InvalidArgument (nothing saved) for a state_dict entry that is not a tensor, a
        non-str key, an unsupported dtype (e.g. float16: convert it), non-JSON tags or an
        example_input with a network that is not a torch.nn.Module; NotFound for a path that
        is not a directory, or a directory without model.json."""
        _check_tags(tags, ("model_name", "example_input"), "save_model")
        if example_input is not None and not _is_torch_module(network):
            raise _core.InvalidArgument("save_model: example_input= traces a torch.nn.Module; network is of type "
                                        f"{type(network).__name__}")
        tags_text = _convert.to_json_text(tags, "model tags")
        if isinstance(network, (str, os.PathLike)):
            if not os.path.isdir(network):
                # A str is taken for a model directory's path: say so when there is none.
                raise _core.NotFound(f"save_model: network is the path {os.fspath(network)!r}, which is not a "
                                     "directory; give a torch.nn.Module, a dict of name -> array or the path of a "
                                     "saved model directory (model.json + weights.safetensors)")
            return self._core.save_model_dir(os.fspath(network), model_name, tags_text)
        architecture: Dict[str, Any]
        parts: Dict[str, bytes] = {}
        if _is_torch_module(network):
            architecture = {"format": "pytorch_state_dict",
                            "module": f"{type(network).__module__}.{type(network).__qualname__}"}
            weights = network.state_dict()
            tensors = _convert.weights_to_tensors(weights, "weight")  # checked before compiling
            compiled, method, why = _torchscript.compile_module(network, example_input)
            if compiled is None:
                warnings.warn(f"save_model: {model_name} is saved without TorchScript, so tensorhub serve cannot "
                              f"serve it: {why}", stacklevel=2)
            else:
                architecture["torchscript"] = method
                parts[_torchscript.PART] = compiled
        elif isinstance(network, dict):
            architecture = {"format": "named_tensors"}
            tensors = _convert.weights_to_tensors(network, "weight")
        else:
            raise _core.InvalidArgument(f"save_model: network is of type {type(network).__name__}; give a "
                                        "torch.nn.Module, a dict of name -> array or a model directory")
        return self._core.save_model(_convert.to_json_text(architecture, "architecture"), tensors, model_name,
                                     tags_text, parts)

    def find_top_model(self, model_name: Optional[str] = None, sort: Sort = None,
                       **filter: Any) -> Optional[StoredModel]:
        """The first model named `model_name` (any when None) matching `filter` in `sort`
        order (newest first when None), e.g. ``find_top_model("mlp", sort=[("test_accuracy",
        -1)])``, as a StoredModel (tags as attributes, state_dict(), load_into(module)); None
        when none matches. Raises DataLoss when its blobs fail verification."""
        if model_name is None:
            found = self.find_models(sort=sort, limit=1, **filter)
            return found[0] if found else None
        top = self._core.find_top_model(model_name, _filter(filter), _convert.check_sort(sort))
        if top is None:
            return None
        return StoredModel(self, top[0], top[1], top[2])

    def find_models(self, model_name: Optional[str] = None, sort: Sort = None, limit: int = 0,
                    **filter: Any) -> List[StoredModel]:
        """The matching models as StoredModels (newest first unless `sort` says; at most
        `limit`, 0 = all); their weights are read when first used."""
        text = self._core.find_documents("models", _filter(filter, "model_name", model_name),
                                         _convert.check_sort(sort), limit)
        return [StoredModel(self, _convert.json.dumps(d)) for d in _convert.json.loads(text)]

    def delete_models(self, model_name: Optional[str] = None, *, force: bool = False, **filter: Any) -> int:
        """Deletes the matching models and their unshared blobs; returns how many. A model an
        alias names is kept, and FailedPrecondition raised naming the alias, unless
        ``force=True`` (then its aliases are deleted too, recorded in their history)."""
        return self._core.delete_models(_filter(filter, "model_name", model_name), bool(force))

    def delete_model(self, model_name: Optional[str] = None, *, force: bool = False, **filter: Any) -> int:
        """TensorHub's name for delete_models."""
        return self.delete_models(model_name, force=force, **filter)

    # ---- model aliases (MLflow's: a team's names for model versions, with history) --------

    def set_model_alias(self, model_name: str, alias: str, model_id: int, *, reason: str = "",
                        user: Optional[str] = None) -> Optional[int]:
        """Points ``alias`` (e.g. "champion") of model ``model_name`` at the model document
        ``model_id``, creating or moving it atomically, and records the move (who, when, from,
        to, ``reason``) in its history; returns the id it named before (None when new).
        ``user`` defaults to this process's user. Raises InvalidArgument for a bad alias name,
        NotFound when ``model_id`` is not a model of that name in this project."""
        return self._core.set_model_alias(model_name, alias, int(model_id), reason, user or "")

    def delete_model_alias(self, model_name: str, alias: str, *, reason: str = "",
                           user: Optional[str] = None) -> Optional[int]:
        """Deletes ``alias`` of ``model_name`` (the model stays), recorded in its history;
        returns the id it named, or None when there was no such alias."""
        return self._core.delete_model_alias(model_name, alias, reason, user or "")

    def find_model_aliases(self, model_name: Optional[str] = None) -> List[Dict[str, Any]]:
        """The aliases of ``model_name`` (of every model when None) as dicts: model_name,
        alias, model_id, time (ISO 8601 UTC), user."""
        return _convert.from_json_text(self._core.find_model_aliases(model_name or ""))

    def find_model_alias(self, model_name: str, alias: str) -> Optional[Dict[str, Any]]:
        """Where ``alias`` of ``model_name`` points (a dict as find_model_aliases gives), or None."""
        for a in self.find_model_aliases(model_name):
            if a["alias"] == alias:
                return a
        return None

    def find_model_by_alias(self, model_name: str, alias: str) -> Optional[StoredModel]:
        """The model ``alias`` of ``model_name`` names, as a StoredModel (MLflow's
        get_model_version_by_alias), or None when there is no such alias."""
        target = self.find_model_alias(model_name, alias)
        if target is None:
            return None
        found = self.find_models(model_name, id=target["model_id"], limit=1)
        return found[0] if found else None

    def model_alias_history(self, model_name: str, alias: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every move of ``model_name``'s aliases (only ``alias``'s when given), oldest first,
        as dicts: id, time (ISO 8601 UTC), model_name, alias, from_id and to_id (None when the
        alias was created / deleted), user, reason."""
        return _convert.from_json_text(self._core.model_alias_history(model_name, alias or ""))

    # ---- logs ----------------------------------------------------------------------------

    def _save_log(self, kind: str, fields: Dict[str, Any]) -> int:
        return self._core.save_document(_LOG_COLLECTIONS[kind], _convert.to_json_text(fields, f"{kind} log"))

    def _find_logs(self, kind: str, sort: Sort, filter: Dict[str, Any]) -> List[Dict[str, Any]]:
        return _documents(self._core.find_documents(_LOG_COLLECTIONS[kind], _filter(filter),
                                                    _convert.check_sort(sort), 0))

    def _delete_logs(self, kind: str, filter: Dict[str, Any]) -> int:
        return self._core.delete_documents(_LOG_COLLECTIONS[kind], _filter(filter))

    def save_training_log(self, **fields: Any) -> int:
        """Saves a training log entry, e.g. ``save_training_log(epoch=3, loss=0.41)``; returns its id."""
        return self._save_log("training", fields)

    def save_validation_log(self, **fields: Any) -> int:
        """Saves a validation log entry; returns its id."""
        return self._save_log("validation", fields)

    def save_testing_log(self, **fields: Any) -> int:
        """Saves a testing log entry; returns its id."""
        return self._save_log("testing", fields)

    def find_training_logs(self, sort: Sort = None, **filter: Any) -> List[Dict[str, Any]]:
        """Matching training log entries as dicts (fields, id, project_name, time), oldest first."""
        return self._find_logs("training", sort, filter)

    def find_validation_logs(self, sort: Sort = None, **filter: Any) -> List[Dict[str, Any]]:
        """Matching validation log entries as dicts, oldest first unless `sort` says."""
        return self._find_logs("validation", sort, filter)

    def find_testing_logs(self, sort: Sort = None, **filter: Any) -> List[Dict[str, Any]]:
        """Matching testing log entries as dicts, oldest first unless `sort` says."""
        return self._find_logs("testing", sort, filter)

    def delete_training_logs(self, **filter: Any) -> int:
        """Deletes matching training log entries (all when no filter); returns how many."""
        return self._delete_logs("training", filter)

    def delete_validation_logs(self, **filter: Any) -> int:
        """Deletes matching validation log entries; returns how many."""
        return self._delete_logs("validation", filter)

    def delete_testing_logs(self, **filter: Any) -> int:
        """Deletes matching testing log entries; returns how many."""
        return self._delete_logs("testing", filter)

    delete_training_log = delete_training_logs
    delete_validation_log = delete_validation_logs
    delete_testing_log = delete_testing_logs

    # ---- tasks ---------------------------------------------------------------------------

    def create_task(self, task_name: str, command: Optional[str] = None,
                    hyper_parameters: Optional[Dict[str, Any]] = None, saved_result_keys: Optional[List[str]] = None,
                    *, script: Optional[str] = None, python: Optional[str] = None, max_attempts: int = 3,
                    timeout_s: float = 0, priority: int = 0, resources: Optional[Dict[str, Any]] = None,
                    **tags: Any) -> int:
        """Puts a pending task on the queue; returns its id. A runner (``tensorhub runner``)
        claims it by `task_name` and runs either `command` (``{name}`` replaced by that
        hyperparameter; the hyperparameters also in TENSORHUB_HYPER_PARAMETERS, read with
        tensorhub.task_context()) or, as TensorLayer's TensorHub did, the Python file `script`:
        its text is stored in the task (so no runner needs a copy), and a runner runs it with
        `python` (default: the runner's ``--python``, else ``python3`` on its PATH) with the
        hyperparameters as the script's global variables, then stores the globals named in
        `saved_result_keys` as the result. The task finishes when every `saved_result_keys`
        entry is set. `max_attempts` failed attempts fail it; `timeout_s` limits an attempt
        (0: none); higher `priority` is claimed first; `tags` are free-form. `resources` is
        what each attempt needs of its runner, as Ray Tune's ``with_resources``:
        ``{"cpus": 2, "gpus": 1, "memory": "8GiB"}``, every key optional; cpus may be
        fractional (it sets the task's OMP_NUM_THREADS to ceil(cpus)), gpus is a count (the
        runner picks which and sets CUDA_VISIBLE_DEVICES), memory is bytes or a size such as
        "8G"/"8GiB" (1024-based, as Slurm's --mem) or "8GB" (1000-based); over it the kernel
        kills the task where the runner has cgroups and the attempt fails with "out of memory
        (limit 8 GiB)". A request that no live runner could ever meet raises InvalidArgument
        naming the largest runner's resources; with no live runner it is queued with a
        UserWarning. Raises
        InvalidArgument for a task the queue refuses (neither or both of command and script, a
        script that is not UTF-8 text), NotFound for a script file that does not exist."""
        _check_tags(tags, _TASK_KEYWORDS, "create_task")
        spec = {"task_name": task_name, "command": command or "", "hyper_parameters": hyper_parameters or {},
                "saved_result_keys": list(saved_result_keys or []), "max_attempts": max_attempts,
                "timeout_s": timeout_s, "priority": priority, "tags": tags}
        if script is not None:
            spec.update(_read_script(script), python=python or "")
        elif python is not None:
            raise _core.InvalidArgument("create_task: python= names the interpreter of a script task; give script=")
        if isinstance(saved_result_keys, str):
            raise _core.InvalidArgument("saved_result_keys is a str; give a list of names")
        if resources is not None:
            if not isinstance(resources, dict):
                raise _core.InvalidArgument('create_task: resources is a dict such as {"cpus": 2, "gpus": 1, '
                                            f'"memory": "8GiB"}}, got {type(resources).__name__}')
            spec["resources"] = resources
        text = _convert.to_json_text(spec, "task")
        if resources:
            warning = self._core.check_task_resources(text)
            if warning:
                warnings.warn(warning, UserWarning, stacklevel=2)
        return self._core.create_task(text)

    def run_top_task(self, task_name: Optional[str] = None, sort: Sort = None, *,
                     python: Optional[str] = None) -> bool:
        """Claims one pending task of `task_name` (any when None) in this project and runs it
        to its end through the same C++ runner as ``tensorhub runner``: with a lease and
        heartbeats, as a child process (a script task under `python`, by default this
        interpreter, so the calling virtual environment's packages are there), with its
        timeout, retries and clean-up. Returns True if it claimed one (also when its attempt failed
        before it could start, e.g. a spec task, which needs ``tensorhub runner``), False if none
        was pending.
        Highest priority first, then newest, or oldest with ``sort=[("time", 1)]`` (TensorHub's
        sort, on "time" or "id" only). Ctrl-C gives the task back to the queue and raises
        KeyboardInterrupt. Spec tasks need ``tensorhub runner``, which has the trainer."""
        oldest_first = False
        for key, direction in _convert.check_sort(sort):
            if key not in ("time", "id"):
                raise _core.InvalidArgument(f"run_top_task sorts by \"time\" or \"id\" only, not \"{key}\"")
            oldest_first = direction > 0
        return _core.run_top_task(self._core.uri, self.project_name, task_name or "", oldest_first,
                                  python or sys.executable)

    def check_unfinished_task(self, task_name: Optional[str] = None, **filter: Any) -> bool:
        """True while a matching task is pending or running (a task whose runner died stops
        counting once its lease expires)."""
        return self._core.check_unfinished_task(_filter(filter, "task_name", task_name))

    def find_tasks(self, task_name: Optional[str] = None, sort: Sort = None, limit: int = 0,
                   **filter: Any) -> List[Dict[str, Any]]:
        """Matching tasks as dicts (id, task_name, status, hyper_parameters, result, error,
        attempt, ...; times as ISO 8601 text), e.g. ``find_tasks(status="failed")``. Each has
        "attempts": what each attempt used, as find_task_attempts gives it but without
        "gpu_samples" (read in one query for all the tasks)."""
        return _convert.from_json_text(self._core.find_tasks(_filter(filter, "task_name", task_name),
                                                             _convert.check_sort(sort), limit))

    def find_task_attempts(self, task_id: int) -> List[Dict[str, Any]]:
        """The attempts of task ``task_id``, first attempt first, as dicts: attempt, owner (the
        runner), host, started_at and finished_at (ISO 8601 text, "" while running), outcome
        ("running", "finished", "failed", "released", "lost" or "cancelled"), error, cpus,
        memory_limit_bytes, gpus (device ids), wall_s and cpu_s (seconds), peak_memory_bytes
        and memory_source ("cgroup" or "rusage"), gpu_samples (``{"t": seconds since the
        start, "utilization": percent, "memory_bytes": n, "gpu": id}``, sampled through
        NVIDIA's NVML where the runner has it), gpu_utilization_mean and _max (None without
        samples). Empty for a task no runner has started (or another project's id)."""
        return _convert.from_json_text(self._core.find_task_attempts(int(task_id)))

    def search_results(self, name: str = "default", pareto: bool = False) -> Dict[str, Any]:
        """What the stored search ``name`` (``tensorhub tune --name``) found, as
        ``tensorhub tune results --json`` prints it: "trials" (best first, each with its
        "status", "score", "hyper_parameters", "epoch_values", its task's "result"; with
        several objectives its "values", one per objective), "best", "done", "reason", and for
        a search of several objectives "objectives" and "pareto_front" (the front's trial
        ids). ``pareto=True`` keeps only the front's trials in "trials". Raises LookupError
        when there is no such search."""
        summary = _convert.from_json_text(self._core.search_results(name))
        if pareto:
            front = set(summary.get("pareto_front") or [])
            summary["trials"] = [t for t in summary["trials"] if t["trial_id"] in front]
        return summary

    def count_tasks(self, task_name: Optional[str] = None, **filter: Any) -> Dict[str, int]:
        """Counts of matching tasks by status: pending, running, finished, failed, cancelled."""
        return self._core.count_tasks(_filter(filter, "task_name", task_name))

    def cancel_tasks(self, task_name: Optional[str] = None, **filter: Any) -> int:
        """Cancels matching pending or running tasks; returns how many."""
        return self._core.cancel_tasks(_filter(filter, "task_name", task_name))

    def delete_tasks(self, task_name: Optional[str] = None, **filter: Any) -> int:
        """Deletes matching tasks (all of the project when no argument); returns how many."""
        return self._core.delete_tasks(_filter(filter, "task_name", task_name))


def _is_torch_module(value: Any) -> bool:
    """True for a torch.nn.Module, without importing torch for anything else."""
    return any(c.__module__ == "torch.nn.modules.module" and c.__name__ == "Module" for c in type(value).__mro__)
