#!/usr/bin/python3
"""TF Serving's gRPC Predict on an Embedding model served by `tensorhub serve`, for
tests/serve_grpc_test.cpp (ServeGrpc.EmbeddingModelPredictsAsRestAndRefusesOutOfRangeIds).

Stubs are generated as tests/grpc_client.py does. The model (Embedding with mask_zero ->
GlobalAveragePooling1D -> Dense) takes ids [n, 4] as DT_FLOAT; the client checks that gRPC
Predict answers what REST :predict answers for the same ids, and that an id outside
[0, input_dim) is INVALID_ARGUMENT naming the layer, the value and input_dim.

usage: grpc_embedding_client.py --proto_dir DIR --grpc HOST:PORT --rest http://HOST:PORT --model NAME
       --input_dim N
Prints one line per check; exits 1 at the first failure, saying what differed.
"""
import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpc_client import check, fail, generate_stubs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto_dir", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--rest", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input_dim", type=int, required=True)
    args = ap.parse_args()

    generate_stubs(args.proto_dir, tempfile.mkdtemp(prefix="tensorhub-grpc-stubs-"))
    import grpc
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(args.grpc))

    def rest(body):
        req = urllib.request.Request(args.rest + "/v1/models/" + args.model + ":predict",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def request(rows):
        req = predict_pb2.PredictRequest()
        req.model_spec.name = args.model
        t = req.inputs["inputs"]
        t.dtype = types_pb2.DT_FLOAT
        t.tensor_shape.dim.add().size = len(rows)
        t.tensor_shape.dim.add().size = len(rows[0])
        for row in rows:
            t.float_val.extend(float(v) for v in row)
        return req

    deadline = time.time() + 60
    rows = [[1, 2, 0, 0], [3, 3, 3, 0], [args.input_dim - 1, 1, 2, 3], [0, 0, 0, 0]]
    while True:
        try:
            r = stub.Predict(request(rows), timeout=30)
            break
        except grpc.RpcError as e:
            if time.time() > deadline:
                fail("Predict never answered: %s %s" % (e.code().name, e.details()))
            time.sleep(0.1)
    y = r.outputs["outputs"]
    got = list(y.float_val)
    check([d.size for d in y.tensor_shape.dim] == [4, 2], "Predict's output has shape [4, 2]")
    want = [v for row in rest({"instances": rows})["predictions"] for v in row]
    check(len(got) == len(want) and all(abs(a - b) <= 1e-6 for a, b in zip(got, want)),
          "Predict over gRPC equals REST: %s == %s" % (got, want))

    bad = [[1, 2, args.input_dim, 0]]
    try:
        stub.Predict(request(bad), timeout=30)
        fail("an out-of-range id was answered")
    except grpc.RpcError as e:
        text = 'Embedding layer "embedding": input value %d (element 2' % args.input_dim
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and text in e.details() and
              "input_dim = %d" % args.input_dim in e.details(),
              "an out-of-range id is INVALID_ARGUMENT naming the layer and the value: %s %r"
              % (e.code().name, e.details()))
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
