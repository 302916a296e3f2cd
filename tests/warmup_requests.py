#!/usr/bin/python3
"""Writes a TF Serving warmup file (assets.extra/tf_serving_warmup_requests) for
tests/serve_warmup_test.cpp, as a TF Serving user writes one: PredictionLog records made with
Python's protobuf (Debian's python3-protobuf; the classes generated at start by
python3-grpc-tools from the project's proto/, as a user generates them from TF Serving's), framed
as TFRecord records (tensorflow/core/lib/io/record_writer.cc: little-endian length, masked
CRC-32C of the length, data, masked CRC-32C of the data; python3-crc32c), as
tf.io.TFRecordWriter writes them.

usage: warmup_requests.py --proto_dir DIR --out FILE --records SPEC[,SPEC...]
                          [--corrupt_crc] [--truncate N]
SPEC is KIND or KIND*COUNT, KIND one of
  predict        predict_log: PredictRequest of model_spec {name: "half_plus_two"}, input x = [1.0, 2.0]
  predict_alias  predict_log whose input is named z (not in the signature)
  regress        regress_log: RegressionRequest of two examples, x = 1.0 and 3.0
  classify       classify_log: ClassificationRequest of one example, x = 2.0, signature classify_x_to_y
  session_run    session_run_log (TF Serving refuses it: Unimplemented)
  streamed       predict_streamed_log (refused as session_run)
  multi          multi_inference_log (TF Serving runs it; tensorhub has no MultiInference)
  none           a PredictionLog with log_metadata only (no log type: skipped)
  garbage        bytes that are not a PredictionLog (a length-delimited field cut short)
--corrupt_crc flips a bit of the last record's data CRC; --truncate N drops the file's last N bytes.
Prints the number of records written.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import crc32c


def generate_classes(proto_dir, out_dir):
    protos = subprocess.run(["find", "tensorflow", "tensorflow_serving", "-name", "*.proto"],
                            cwd=proto_dir, check=True, capture_output=True, text=True).stdout.split()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir] + protos,
                   cwd=proto_dir, check=True)
    sys.path.insert(0, out_dir)


def masked_crc(data):
    # TensorFlow's crc32c::Mask: rotate right by 15 bits, add 0xa282ead8.
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def make_record(kind):
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    log = prediction_log_pb2.PredictionLog()
    log.log_metadata.model_spec.name = "half_plus_two"
    if kind in ("predict", "predict_alias"):
        req = log.predict_log.request
        req.model_spec.name = "half_plus_two"
        t = req.inputs["x" if kind == "predict" else "z"]
        t.dtype = types_pb2.DT_FLOAT
        t.tensor_shape.dim.add().size = 2
        t.float_val.extend([1.0, 2.0])
    elif kind == "regress":
        req = log.regress_log.request
        req.model_spec.name = "half_plus_two"
        for x in (1.0, 3.0):
            req.input.example_list.examples.add().features.feature["x"].float_list.value.append(x)
    elif kind == "classify":
        req = log.classify_log.request
        req.model_spec.name = "half_plus_two"
        req.model_spec.signature_name = "classify_x_to_y"
        req.input.example_list.examples.add().features.feature["x"].float_list.value.append(2.0)
    elif kind == "session_run":
        log.session_run_log.request.fetch.append("y:0")
    elif kind == "streamed":
        log.predict_streamed_log.request.add().model_spec.name = "half_plus_two"
    elif kind == "multi":
        task = log.multi_inference_log.request.tasks.add()
        task.model_spec.name = "half_plus_two"
        task.method_name = "tensorflow/serving/regress"
    elif kind == "none":
        pass
    elif kind == "garbage":
        return b"\x0a\x7f" + b"cut short"  # field 1, 127 bytes announced, 9 given
    else:
        raise SystemExit("unknown record kind " + kind)
    return log.SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto_dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--records", required=True)
    ap.add_argument("--corrupt_crc", action="store_true")
    ap.add_argument("--truncate", type=int, default=0)
    args = ap.parse_args()
    generate_classes(args.proto_dir, tempfile.mkdtemp(prefix="tensorhub-warmup-protos-"))

    records = []
    for spec in args.records.split(","):
        kind, _, count = spec.partition("*")
        records += [make_record(kind)] * int(count or 1)
    data = b"".join(frame(r) for r in records)
    if args.corrupt_crc:
        data = data[:-1] + bytes([data[-1] ^ 0x01])
    if args.truncate:
        data = data[:-args.truncate]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(data)
    print(len(records))


if __name__ == "__main__":
    main()
