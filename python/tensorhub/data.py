"""tensorhub.data: sharded (TFRecord) hub datasets read as tf.data-style pipelines, batch by
batch, never as one array in memory.

A sharded dataset is stored by ``tensorhub dataset import --tfrecord FILES --name NAME
[--features FEATURES.json]``: each TFRecord file one shard, with tf.io feature specs as its
schema. ``from_hub`` reads it shard by shard in C++ (each shard's blob fetched whole, verified,
into the machine's blob cache as runners fetch theirs, so a shard crosses the network once per
machine: ``$TENSORHUB_BLOB_CACHE_DIR``, else ``~/.cache/tensorhub/blobs``, at most
``$TENSORHUB_BLOB_CACHE_MAX_MB``; with ``TENSORHUB_BLOB_CACHE=off`` into a temporary file
removed once read; then read record by record), parses each tf.train.Example with the specs
(tf.io.parse_single_example's rules) and yields dicts::

    import tensorhub, tensorhub.data
    db = tensorhub.TensorHub("sqlite:///tmp/hub.db", project_name="fmnist")
    for batch in tensorhub.data.from_hub(db, "fmnist-train", batch_size=256, shuffle=10000, seed=1):
        x, y = batch["image"], batch["label"]     # ndarray float32 [256, 784], int64 [256]

What each feature becomes, per batch of B examples (unbatched: one example, the B dimension
left out):

- FixedLenFeature float32 / int64 of shape S: an ndarray of that dtype, shape [B, *S].
- FixedLenSequenceFeature float32 / int64 of row shape S: [B, R, *S], R the most rows in the
  batch, shorter examples padded with the spec's default_value (else 0), as
  tf.io.parse_example pads.
- FixedLenFeature string of shape []: a list of B ``bytes`` (no numpy object arrays; decode
  raw pixels with ``numpy.frombuffer``). Other string features are refused (InvalidArgument).
- VarLenFeature float32 / int64: a list of B 1-D ndarrays, the values of each example (views
  of one buffer, no copy).
- A dataset imported without feature specs, and no ``features=`` given: {"record": the
  serialized records}, a list of B ``bytes``.

Dense arrays take the batch's buffer without a copy (the array owns it); ``bytes`` are one
copy each. Memory: the shuffle buffer (``shuffle`` examples), the prefetch buffer
(``prefetch`` batches), one record and one batch in the making.
The pipeline runs in C++ threads that never take the GIL; the GIL is released while the next
batch is made. Breaking out of a loop, an exception, or Ctrl-C (KeyboardInterrupt, raised
once the batch in the making is ready) ends the pass: the iterator, once dropped, stops and
joins its threads.

Errors (tensorhub.Error subclasses, raised by from_hub or, for the data, by the loop):
NotFound for a dataset name that does not exist (with the names nearest to it),
FailedPrecondition for a tensor dataset (read it with TensorHub.find_top_dataset),
InvalidArgument for invalid specs or a record that breaks them (naming the feature and the
element), DataLoss for a corrupt shard (naming the shard and the byte offset).
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, Iterator, List, Mapping, Optional

from . import _convert, _core
from ._convert import Sort
from ._hub import TensorHub

#: tf.data.AUTOTUNE: a prefetch buffer of 2 elements (a fixed heuristic, not runtime tuning).
AUTOTUNE = -1
#: What Dataset.cardinality() returns for a pipeline without end, or of unknown length.
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2

_FROM_HUB_KEYWORDS = ("batch_size", "drop_remainder", "shuffle", "seed", "num_shards", "index", "prefetch",
                      "features", "sort")


def _count(value: Any, what: str, minimum: int) -> int:
    """`value` as an int >= `minimum`; raises InvalidArgument naming `what` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _core.InvalidArgument(f"{what} must be an int >= {minimum}, got {value!r}")
    return value


def _seed(seed: Optional[int]) -> Optional[int]:
    """None, or a seed in [0, 2**64); raises InvalidArgument otherwise."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
        raise _core.InvalidArgument(f"seed must be None or an int in [0, 2**64), got {seed!r}")
    return seed


class Dataset:
    """A pipeline over a sharded hub dataset (made by ``from_hub``), with tf.data.Dataset's
    names. Immutable: each method returns a new Dataset. Iterating it (``for element in
    ds``) starts a new pass from the first record and yields dicts of feature name -> value
    (see the module's docstring for each feature's form); every pass reads the shards again.
    One Dataset may be iterated by several threads at once, each pass by one thread."""

    def __init__(self, core: _core.HubDataset) -> None:
        """Wraps a _core.HubDataset; use ``from_hub`` to make one."""
        self._core = core

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """tf.data's batch: `batch_size` consecutive examples per element, the last one smaller
        unless `drop_remainder`. Variable-length features are padded to the batch's longest
        and cut back when they reach Python. Raises InvalidArgument for batch_size < 1 or a
        second batch."""
        return Dataset(self._core.batch(_count(batch_size, "batch_size", 1), bool(drop_remainder)))

    def shuffle(self, buffer_size: int, seed: Optional[int] = None,
                reshuffle_each_iteration: bool = True) -> "Dataset":
        """tf.data's shuffle: each element is drawn uniformly from a buffer of `buffer_size`
        elements. With a `seed` every pass's order is reproducible; reshuffle_each_iteration
        gives each pass (and each repetition) its own order. Before batch(), it shuffles
        examples; after it, whole batches."""
        return Dataset(self._core.shuffle(_count(buffer_size, "buffer_size", 1), _seed(seed),
                                          bool(reshuffle_each_iteration)))

    def prefetch(self, buffer_size: int = AUTOTUNE) -> "Dataset":
        """tf.data's prefetch: a C++ thread keeps up to `buffer_size` elements ready
        (AUTOTUNE: 2; 0: none)."""
        if buffer_size != AUTOTUNE:
            _count(buffer_size, "buffer_size", 0)
        return Dataset(self._core.prefetch(buffer_size))

    def take(self, count: int) -> "Dataset":
        """tf.data's take: at most `count` elements (-1: all)."""
        return Dataset(self._core.take(_count(count, "count", -1)))

    def skip(self, count: int) -> "Dataset":
        """tf.data's skip: all but the first `count` elements (-1: none)."""
        return Dataset(self._core.skip(_count(count, "count", -1)))

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        """tf.data's repeat: `count` passes over this dataset, forever when None (or -1)."""
        return Dataset(self._core.repeat(-1 if count is None else _count(count, "count", -1)))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """tf.data's shard: the elements whose position mod `num_shards` is `index` (every
        worker reads every record; from_hub's num_shards= splits the files instead). Raises
        InvalidArgument unless 0 <= index < num_shards."""
        return Dataset(self._core.shard(_count(num_shards, "num_shards", 1), _count(index, "index", 0)))

    def cardinality(self) -> int:
        """Elements of one pass, from the record counts stored with the shards, or
        INFINITE_CARDINALITY (-1) / UNKNOWN_CARDINALITY (-2)."""
        return self._core.cardinality()

    def __len__(self) -> int:
        """cardinality(); TypeError when it is infinite or unknown (as tf.data)."""
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is " + ("infinite" if n == INFINITE_CARDINALITY else "unknown"))
        return n

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        """A new pass. The iterator's close() (or dropping it) stops the pass at once."""
        return iter(self._core)

    def __repr__(self) -> str:
        n = self.cardinality()
        size = "infinite" if n == INFINITE_CARDINALITY else "unknown" if n < 0 else str(n)
        return f"<tensorhub.data.Dataset: {size} {'batches' if self._core.batched else 'examples'}>"


def _not_found(hub: TensorHub, dataset_name: str, filter: Mapping[str, Any]) -> _core.NotFound:
    """NotFound for `dataset_name`, naming the project's datasets nearest to it."""
    documents = _convert.from_json_text(hub._core.find_documents("datasets", "{}", [], 1000))
    names = sorted({d["tags"].get("dataset_name") for d in documents} - {None})
    where = f'project "{hub.project_name}" of {hub.uri}'
    if filter and dataset_name in names:
        return _core.NotFound(f'no dataset "{dataset_name}" in {where} matches {_convert.to_json_text(filter, "filter")}')
    near = difflib.get_close_matches(dataset_name, names, n=3, cutoff=0.6)
    if near:
        hint = "did you mean " + " or ".join(f'"{n}"' for n in near) + "?"
    elif names:
        hint = "its datasets: " + _convert.names(names[:10]) + (", ..." if len(names) > 10 else "")
    else:
        hint = "it holds no dataset"
    return _core.NotFound(f'no dataset named "{dataset_name}" in {where}; {hint} (TFRecord files become a sharded '
                          "dataset with `tensorhub dataset import --tfrecord FILES --name NAME`)")


def _check_filter(filter: Mapping[str, Any]) -> None:
    """Raises InvalidArgument for a filter key that looks like a misspelt keyword of from_hub
    (e.g. ``batchsize=``), which would otherwise filter out every dataset."""
    for key in filter:
        near = difflib.get_close_matches(key, _FROM_HUB_KEYWORDS, n=1, cutoff=0.8)
        if near:
            raise _core.InvalidArgument(f'from_hub: unknown keyword "{key}" (did you mean {near[0]}=?); '
                                        "rename it if it is a tag to filter on")


def from_hub(hub: TensorHub, dataset_name: str, *, batch_size: Optional[int] = None, drop_remainder: bool = False,
             shuffle: int = 0, seed: Optional[int] = None, num_shards: int = 1, index: int = 0,
             prefetch: int = AUTOTUNE, features: Optional[Mapping[str, Any]] = None, sort: Sort = None,
             **filter: Any) -> Dataset:
    """The sharded dataset `dataset_name` of `hub`'s project (the newest one matching
    `filter`, or the first in `sort` order) as a Dataset: its shard files whose position
    mod `num_shards` is `index` (one worker's part: tf.data's advice, shard the files),
    each record parsed with `features` (tf.io specs as JSON-like dicts, e.g. ``{"label":
    {"type": "FixedLenFeature", "shape": [], "dtype": "int64"}}``; default: the specs
    stored with the dataset, else raw records), then ``shuffle(shuffle, seed)`` when
    `shuffle` > 0 (a buffer of that many examples), ``batch(batch_size, drop_remainder)``
    when `batch_size` is given and ``prefetch(prefetch)``. Nothing is read before the first
    pass. Raises NotFound (naming the nearest names) when no dataset matches;
    FailedPrecondition for a tensor dataset; InvalidArgument for invalid specs, a string
    feature of another shape than [], or more `num_shards` than shard files (use
    ``.shard()`` then)."""
    if not isinstance(hub, TensorHub):
        raise _core.InvalidArgument(f"from_hub: hub is a {type(hub).__name__}; give a tensorhub.TensorHub")
    if isinstance(shuffle, bool):
        raise _core.InvalidArgument("from_hub: shuffle= is a buffer size in examples (tf.data's buffer_size), "
                                    "e.g. shuffle=10000; 0 does not shuffle")
    if seed is not None and not shuffle:
        raise _core.InvalidArgument("from_hub: seed= seeds the shuffle; give shuffle= (a buffer size) too")
    _check_filter(filter)
    features_text = ""
    if features is not None:
        if not isinstance(features, Mapping):
            raise _core.InvalidArgument(f"from_hub: features is a {type(features).__name__}; give a dict of "
                                        "feature name -> spec")
        features_text = _convert.value_to_json_text(features, "features")
    core = _core.open_hub_dataset(hub._core, dataset_name, _convert.to_json_text(filter, "filter"),
                                  _convert.check_sort(sort), features_text, _count(num_shards, "num_shards", 1),
                                  _count(index, "index", 0))
    if core is None:
        raise _not_found(hub, dataset_name, filter)
    dataset = Dataset(core)
    if _count(shuffle, "shuffle", 0) > 0:
        dataset = dataset.shuffle(shuffle, seed)
    if batch_size is not None:
        dataset = dataset.batch(batch_size, drop_remainder)
    if prefetch != 0:
        dataset = dataset.prefetch(prefetch)
    return dataset


__all__: List[str] = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "from_hub"]
