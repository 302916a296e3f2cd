#!/usr/bin/python3
"""Parses and batches tf.train.Example records with protobuf and numpy: the peer of
bench/example_parse.cpp.

Reads the TFRecord files given (uncompressed; the framing is read with struct, untimed), then
times, for --rounds rounds, parsing every record with the generated Example message
(python3-protobuf; the _pb2 modules are generated at start with protoc from the project's own
proto/tensorhub/tf/{feature,example}.proto into a temporary directory) and batching by
--batch-size as a Python user does without TensorFlow: the "image" bytes of a batch joined into
one numpy uint8 [B, 784] array, the "label" int64 values into a numpy int64 [B] array.
Prints one JSON line:
  {"records": 60000, "batch_size": 128, "seconds": [...], "records_per_s": ..., "checksum": ...,
   "protobuf": "4.21.12", "implementation": "cpp"}
where records_per_s uses the median round and checksum is the sum of every pixel and label
(to check that both sides parsed the same values). Runs with Debian's /usr/bin/python3,
python3-protobuf and python3-numpy, and Debian's protoc (protobuf-compiler).
"""
import argparse
import atexit
import importlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def load_example_class(proto_dir):
    out = tempfile.mkdtemp(prefix="example_pb2-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    subprocess.run(["protoc", "--python_out=" + out, "-I", proto_dir,
                    os.path.join(proto_dir, "tensorhub/tf/feature.proto"),
                    os.path.join(proto_dir, "tensorhub/tf/example.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("tensorhub.tf.example_pb2").Example


def read_records(path):
    data = open(path, "rb").read()
    records, at = [], 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        at += 12
        records.append(data[at:at + length])
        at += length + 4
    return records


def parse_batch(example_class, batch):
    images, labels = [], []
    for serialized in batch:
        feature = example_class.FromString(serialized).features.feature
        images.append(feature["image"].bytes_list.value[0])
        labels.append(feature["label"].int64_list.value[0])
    x = np.frombuffer(b"".join(images), dtype=np.uint8).reshape(len(batch), -1)
    y = np.array(labels, dtype=np.int64)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", nargs="+", required=True)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--proto-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "..", "..", "proto"))
    args = parser.parse_args()
    example_class = load_example_class(args.proto_dir)
    records = [r for f in args.files for r in read_records(f)]
    bs = args.batch_size
    checksum = 0
    for i in range(0, len(records), bs):  # untimed: the values both sides must agree on
        x, y = parse_batch(example_class, records[i:i + bs])
        checksum += int(x.sum(dtype=np.uint64)) + int(y.sum())
    seconds = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for i in range(0, len(records), bs):
            parse_batch(example_class, records[i:i + bs])
        seconds.append(time.perf_counter() - t0)
    median = sorted(seconds)[len(seconds) // 2] if len(seconds) % 2 else \
        sum(sorted(seconds)[len(seconds) // 2 - 1:len(seconds) // 2 + 1]) / 2
    from google.protobuf import __version__ as pb_version
    from google.protobuf.internal import api_implementation
    print(json.dumps({"records": len(records), "batch_size": bs, "seconds": seconds,
                      "records_per_s": len(records) / median, "checksum": checksum,
                      "protobuf": pb_version, "implementation": api_implementation.Type()}))


if __name__ == "__main__":
    main()
