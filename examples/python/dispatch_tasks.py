"""The dispatcher of TensorLayer TensorHub's examples/database, over tensorhub.

Pushes Fashion-MNIST to the hub as TensorHub's six-tuple, queues one script task per
hyperparameter setting (task_script.py, an MLP of 800-800, 600-600 and 400-400 units), waits
for runners (run_tasks.py, or `tensorhub runner`) to finish them, and prints the best model by
test accuracy. The same job as examples/database/dispatch_tasks.cpp, the dataset stored the
same way (first 50,000 training images for training, the other 10,000 for validation, the
10,000 t10k images for testing; 784 float32 pixels in [0, 1], int64 labels).

    /usr/bin/python3 examples/python/dispatch_tasks.py --epochs 5 &
    /usr/bin/python3 examples/python/run_tasks.py

The project's tasks, models and datasets are deleted first, as TensorHub's example did.
Exit status: 0 every task finished, 1 an error (a bad --data or --hub, no model saved), 3 some
task failed.
"""

import argparse
import gzip
import os
import pathlib
import sys
import time

import numpy as np

import tensorhub

#: Debian's dataset-fashion-mnist installs the four idx files here.
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
#: Fashion-MNIST's labels 0-9, tagged on the dataset so that the models (and the dashboard) name them.
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
TASK_SCRIPT = pathlib.Path(__file__).resolve().parent / "task_script.py"


def read_idx(path):
    """The uint8 array of an IDX file (Y. LeCun's MNIST format: 2 zero bytes, type 0x08 =
    unsigned byte, the rank, then each dimension as a big-endian uint32, then the data), gzip
    compressed or not. Raises ValueError naming the file if it is not such a file or its data
    is not as long as its header says."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[:3] != b"\x00\x00\x08" or data[3] == 0:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes (magic {data[:4].hex()})")
    rank = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=rank, offset=4))
    offset = 4 + 4 * rank
    if len(data) - offset != int(np.prod(shape)):
        raise ValueError(f"{path}: its header says {shape} = {int(np.prod(shape))} bytes, it holds "
                         f"{len(data) - offset}")
    return np.frombuffer(data, np.uint8, offset=offset).reshape(shape)


def idx_file(data_dir, stem):
    """data_dir/stem if present, else data_dir/stem.gz (as the C++ loader looks)."""
    plain = pathlib.Path(data_dir) / stem
    return plain if plain.exists() else plain.with_name(stem + ".gz")


def load_fashion_mnist(data_dir, train_size=50000, val_size=10000, test_size=10000):
    """TensorHub's six-tuple (X_train, y_train, X_val, y_val, X_test, y_test) from an
    MNIST-format directory: X_* float32 [n, 784] as pixel / 255, y_* int64 [n]. Training is
    the first `train_size` training images, validation the `val_size` after them, test the
    first `test_size` t10k images. Raises FileNotFoundError for a missing directory or file,
    ValueError when the files hold fewer images."""
    if not pathlib.Path(data_dir).is_dir():
        raise FileNotFoundError(f"{data_dir} is not a directory: install Debian's dataset-fashion-mnist "
                                "or give --data DIR")
    images = read_idx(idx_file(data_dir, "train-images-idx3-ubyte"))
    labels = read_idx(idx_file(data_dir, "train-labels-idx1-ubyte"))
    test_images = read_idx(idx_file(data_dir, "t10k-images-idx3-ubyte"))
    test_labels = read_idx(idx_file(data_dir, "t10k-labels-idx1-ubyte"))
    if train_size + val_size > len(images) or test_size > len(test_images):
        raise ValueError(f"{data_dir} holds {len(images)} training and {len(test_images)} test images: too few "
                         f"for --train-size {train_size} --val-size {val_size} --test-size {test_size}")

    def x(a):
        return a.reshape(len(a), -1).astype(np.float32) / np.float32(255)  # float32 division, as the C++ loader

    def y(a):
        return a.astype(np.int64)

    end = train_size + val_size
    return (x(images[:train_size]), y(labels[:train_size]), x(images[train_size:end]), y(labels[train_size:end]),
            x(test_images[:test_size]), y(test_labels[:test_size]))


def parse_args(argv=None):
    """The command line (see --help)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hub", help="hub URI (default: $TENSORHUB_URI, else sqlite://<cwd>/tensorhub.db)")
    p.add_argument("--project", default=os.environ.get("TENSORHUB_PROJECT") or "tutorial",
                   help="project (default: $TENSORHUB_PROJECT, else tutorial); its tasks, models and datasets "
                        "are deleted first")
    p.add_argument("--data", default=FASHION_MNIST_DIR, help="MNIST-format directory (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=20, help="epochs per training (default: %(default)s)")
    p.add_argument("--units", type=int, nargs="+", default=[800, 600, 400],
                   help="n_units1 = n_units2 of each task (default: 800 600 400)")
    p.add_argument("--train-size", type=int, default=50000, help="training images (default: %(default)s)")
    p.add_argument("--val-size", type=int, default=10000, help="validation images, after the training ones "
                                                               "(default: %(default)s)")
    p.add_argument("--test-size", type=int, default=10000, help="test images (default: %(default)s)")
    p.add_argument("--python", help="interpreter the runners run task_script.py with (default: theirs)")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between progress checks (default: %(default)s)")
    args = p.parse_args(argv)
    for name in ("epochs", "train_size", "val_size", "test_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def wait_for(db, task_name, poll):
    """Waits until no task of `task_name` is pending or running, printing the counts when they change."""
    last = None
    while db.check_unfinished_task(task_name):
        counts = db.count_tasks(task_name)
        line = ", ".join(f"{counts[s]} {s}" for s in ("pending", "running", "finished", "failed"))
        if line != last:
            print(f"waiting for runners: {line}", flush=True)
            last = line
        time.sleep(poll)


def main(argv=None):
    args = parse_args(argv)
    # The data first: a wrong --data must cost neither the previous results nor an empty hub.
    dataset = load_fashion_mnist(args.data, args.train_size, args.val_size, args.test_size)
    db = tensorhub.TensorHub(args.hub, args.project)
    db.delete_tasks()
    db.delete_models()
    db.delete_datasets()
    db.save_dataset(dataset, "mnist", class_names=CLASS_NAMES,
                    description=f"Fashion-MNIST from {args.data}: {args.train_size} train / {args.val_size} "
                                f"validation / {args.test_size} test, 784 floats in [0, 1]")
    print(f"saved dataset mnist to {db.uri}, project {db.project_name}", flush=True)

    for n in args.units:
        task_id = db.create_task("mnist", script=TASK_SCRIPT, python=args.python,
                                 hyper_parameters={"n_units1": n, "n_units2": n, "epochs": args.epochs},
                                 saved_result_keys=["test_accuracy"], description=f"{n}-{n}")
        print(f"created task {task_id}: n_units1 = n_units2 = {n}", flush=True)

    wait_for(db, "mnist", args.poll)
    failed = db.find_tasks("mnist", status="failed")
    for task in failed:
        print(f"task {task['id']} failed: {task['error']}", flush=True)
    best = db.find_top_model("mlp", sort=[("test_accuracy", -1)])
    if best is None:
        print("no model mlp was saved: every task failed (see above)", file=sys.stderr)
        return 1
    print(f"the best accuracy {best.test_accuracy} is from model {best.name} (id {best.id})", flush=True)
    return 3 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, tensorhub.Error) as e:  # a bad --data or --hub: one line, no traceback
        sys.exit(f"dispatch_tasks.py: {e}")
