"""Conversions between Python values and what tensorhub._core takes: JSON text for tags,
filters and documents, dicts of C-contiguous numpy arrays for tensors, and the structure a
dataset was saved as (array, tuple, list or dict) so that it comes back the same."""

from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ._core import InvalidArgument

#: The tag recording the Python structure of a dataset: {"kind": ..., "names": [...]}.
STRUCTURE_TAG = "python_structure"
#: Names of TensorHub's MNIST six-tuple (X_train, y_train, X_val, y_val, X_test, y_test).
SIX_TUPLE_NAMES = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")
#: The tensor name of a dataset saved as one array.
ARRAY_NAME = "data"

Sort = Optional[Sequence[Tuple[str, int]]]


def _check_str_key(key: Any, what: str) -> None:
    """Raises InvalidArgument naming `what` unless `key` (of a dict the caller gave) is a str."""
    if not isinstance(key, str):
        raise InvalidArgument(f"{what} key {key!r} is a {type(key).__name__}, not a str")


def _json_value(value: Any, where: str) -> Any:
    """`value` as plain JSON data; non-finite floats as {"$numberDouble": ...}."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return {"$numberDouble": "NaN"}
        if math.isinf(value):
            return {"$numberDouble": "Infinity" if value > 0 else "-Infinity"}
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            _check_str_key(key, where)
            out[key] = _json_value(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _json_value(value.tolist(), where)
    raise InvalidArgument(f"{where} is a {type(value).__name__}, which is not JSON "
                          "(use numbers, strings, booleans, None, lists and dicts)")


def to_json_text(value: Mapping[str, Any], what: str) -> str:
    """JSON text of the dict `value` (tags, a filter, log fields). Raises InvalidArgument
    naming `what` and the key for anything that is not JSON (numpy scalars are converted)."""
    return json.dumps(_json_value(dict(value), what), allow_nan=False)


def value_to_json_text(value: Any, where: str) -> str:
    """JSON text of any JSON-able `value`; raises InvalidArgument naming `where` otherwise."""
    return json.dumps(_json_value(value, where), allow_nan=False)


def _decode_hook(obj: dict) -> Any:
    if len(obj) == 1 and "$numberDouble" in obj:
        text = obj["$numberDouble"]
        if text in ("NaN", "Infinity", "-Infinity"):
            return float(text.replace("Infinity", "inf"))
    return obj


def from_json_text(text: str) -> Any:
    """Parses JSON text from _core, turning {"$numberDouble": "NaN"} etc. back into floats."""
    return json.loads(text, object_hook=_decode_hook)


def time_of(micros: int) -> _dt.datetime:
    """UTC microseconds since the epoch as an aware datetime."""
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=micros)


def check_sort(sort: Sort) -> List[Tuple[str, int]]:
    """TensorHub's sort, [("test_accuracy", -1), ...], checked; None is []."""
    if sort is None:
        return []
    if isinstance(sort, tuple) and len(sort) == 2 and isinstance(sort[0], str):
        sort = [sort]
    out = []
    for item in sort:
        if (not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[0], str)
                or isinstance(item[1], bool) or item[1] not in (1, -1)):
            raise InvalidArgument(f"sort entry {item!r} is not (field, 1 | -1), "
                                  "e.g. sort=[(\"test_accuracy\", -1)]")
        out.append((item[0], int(item[1])))
    return out


def _is_torch_tensor(value: Any) -> bool:
    return any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in type(value).__mro__)


def as_array(value: Any, where: str) -> np.ndarray:
    """`value` (numpy array, torch tensor, scalar or nested list) as a C-contiguous numpy array
    in native byte order; non-contiguous arrays are copied. Raises InvalidArgument naming
    `where` for object dtype, ragged lists and tensors numpy cannot hold."""
    if _is_torch_tensor(value):
        try:
            value = value.detach().cpu().contiguous().numpy()
        except (TypeError, RuntimeError) as e:
            raise InvalidArgument(f"{where}: torch tensor of {value.dtype} cannot be stored ({e}); "
                                  "convert it, e.g. .float()") from None
    elif not isinstance(value, np.ndarray):
        if isinstance(value, (dict, set, str, bytes)) or value is None:
            raise InvalidArgument(f"{where} is a {type(value).__name__}, not an array")
        try:
            value = np.asarray(value)
        except ValueError as e:
            raise InvalidArgument(f"{where} is ragged or not numeric ({e})") from None
    if value.dtype.kind == "O":
        raise InvalidArgument(f"{where} has dtype object (Python objects, or a ragged nested list): "
                              "only numeric arrays can be stored")
    if value.dtype.byteorder == ">":
        value = value.astype(value.dtype.newbyteorder("="))
    # (numpy.ascontiguousarray would make a 0-d array 1-d)
    return value if value.flags.c_contiguous else value.copy(order="C")


def dataset_to_tensors(dataset: Any) -> Tuple[dict, dict]:
    """(name -> array, structure tag) of a dataset: one array, a tuple or list of arrays
    (six: TensorHub's MNIST names X_train ... y_test) or a dict of str -> array."""
    if isinstance(dataset, Mapping):
        tensors = {}
        for key, value in dataset.items():
            _check_str_key(key, "dataset")
            tensors[key] = as_array(value, f"dataset[{key!r}]")
        return tensors, {"kind": "dict", "names": list(tensors)}
    if isinstance(dataset, (tuple, list)):
        kind = "tuple" if isinstance(dataset, tuple) else "list"
        if not dataset:
            raise InvalidArgument(f"dataset is an empty {kind}")
        names = list(SIX_TUPLE_NAMES) if len(dataset) == 6 else [f"item_{i}" for i in range(len(dataset))]
        tensors = {n: as_array(v, f"dataset[{i}]") for i, (n, v) in enumerate(zip(names, dataset))}
        return tensors, {"kind": kind, "names": names}
    return {ARRAY_NAME: as_array(dataset, "dataset")}, {"kind": "array", "names": [ARRAY_NAME]}


def tensors_to_dataset(tensors: dict, tags: Mapping[str, Any]) -> Any:
    """The structure `dataset_to_tensors` was given, from the arrays and the document's tags; a
    dataset saved without the structure tag (by the command line, or C++) is a dict."""
    structure = tags.get(STRUCTURE_TAG)
    if not isinstance(structure, dict) or not all(n in tensors for n in structure.get("names", [None])):
        return dict(tensors)
    arrays = [tensors[n] for n in structure["names"]]
    kind = structure.get("kind")
    if kind == "array":
        return arrays[0]
    if kind == "tuple":
        return tuple(arrays)
    if kind == "list":
        return arrays
    return {n: tensors[n] for n in structure["names"]}


def weights_to_tensors(weights: Mapping[Any, Any], what: str) -> dict:
    """name -> C-contiguous array of a state_dict or dict of arrays/tensors; raises
    InvalidArgument naming a non-str key or a value that is not a tensor or array."""
    out = {}
    for key, value in weights.items():
        _check_str_key(key, what)
        if not (_is_torch_tensor(value) or isinstance(value, (np.ndarray, np.generic, int, float, bool))):
            raise InvalidArgument(f"{what} \"{key}\" is a {type(value).__name__}, not a tensor or array")
        out[key] = as_array(value, f"{what} \"{key}\"")
    return out


def names(values: Iterable[str]) -> str:
    """"a", "b" for messages."""
    return ", ".join(f'"{v}"' for v in values)
