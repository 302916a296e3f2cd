#!/usr/bin/python3
"""gRPC Predict calls against a `tensorhub serve` whose model splits traffic by weight, for
tests/serve_traffic_split_test.cpp. Stubs are generated as tests/grpc_client.py does.

usage: grpc_split_client.py --proto_dir DIR --grpc HOST:PORT --model NAME --requests N --keys K

Sends N Predicts naming no version (no x-request-id), then three for each of K keys
("grpc-0", "grpc-1", ...) in x-request-id metadata, and prints one JSON object:
{"unkeyed": {"<version>": count, ...}, "keyed": {"<key>": [v1, v2, v3], ...}}, the versions
being the responses' model_spec.version. The test judges them; this script only counts.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpc_client import generate_stubs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto_dir", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--keys", type=int, required=True)
    args = ap.parse_args()

    generate_stubs(args.proto_dir, tempfile.mkdtemp(prefix="tensorhub-grpc-stubs-"))
    import grpc
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(args.grpc))
    req = predict_pb2.PredictRequest()
    req.model_spec.name = args.model
    x = req.inputs["x"]
    x.dtype = types_pb2.DT_FLOAT
    x.tensor_shape.dim.add().size = 1
    x.float_val.append(1.0)

    def version(metadata=()):
        return stub.Predict(req, timeout=30, metadata=metadata).model_spec.version.value

    unkeyed = {}
    deadline = time.time() + 60
    while True:  # the server may still be loading; the first answer counts as any other
        try:
            first = str(version())
            unkeyed[first] = 1
            break
        except grpc.RpcError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)

    for _ in range(args.requests - 1):
        v = str(version())
        unkeyed[v] = unkeyed.get(v, 0) + 1
    keyed = {}
    for k in range(args.keys):
        key = "grpc-%d" % k
        keyed[key] = [version((("x-request-id", key),)) for _ in range(3)]
    print(json.dumps({"unkeyed": unkeyed, "keyed": keyed}), flush=True)


if __name__ == "__main__":
    main()
