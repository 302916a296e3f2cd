#!/usr/bin/python3
"""Peer: a Python gRPC server (python3-grpcio) speaking TF Serving's PredictionService.Predict for
the same two models as bench/peers/fastapi_server.py, with PyTorch (python3-torch): half_plus_two
and the MLP 784 -> 800 -> 800 -> 10 with softmax. Stubs are generated at start from the project's
proto/ with python3-grpc-tools.
Run:  /usr/bin/python3 grpc_torch_server.py --port 18500 [--threads 8]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from concurrent import futures

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stubs():
    proto = os.path.join(ROOT, "proto")
    out = tempfile.mkdtemp(prefix="grpc-peer-stubs-")
    files = subprocess.run(["find", "tensorflow", "tensorflow_serving", "-name", "*.proto"], cwd=proto,
                           check=True, capture_output=True, text=True).stdout.split()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + proto, "--python_out=" + out,
                    "--grpc_python_out=" + out] + files, cwd=proto, check=True)
    sys.path.insert(0, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18500)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    stubs()
    import grpc
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    torch.set_num_threads(1)
    torch.manual_seed(0)
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 800), nn.ReLU(), nn.Linear(800, 800), nn.ReLU(),
                        nn.Linear(800, 10), nn.Softmax(dim=1)).eval()

    def values(t):
        if t.tensor_content:
            return np.frombuffer(t.tensor_content, dtype=np.float32)
        return np.asarray(t.float_val, dtype=np.float32)

    class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            x = values(next(iter(request.inputs.values())))  # the one input, whatever its name
            resp = predict_pb2.PredictResponse()
            resp.model_spec.name = request.model_spec.name
            if request.model_spec.name == "mlp":
                with torch.no_grad():
                    y = mlp(torch.from_numpy(x.copy()).reshape(-1, 784)).numpy()
                out = resp.outputs["y"]
            elif request.model_spec.name == "half_plus_two":
                y = 0.5 * x + 2
                out = resp.outputs["y"]
            else:
                context.abort(grpc.StatusCode.NOT_FOUND, "no model " + request.model_spec.name)
            out.dtype = types_pb2.DT_FLOAT
            for d in y.shape:
                out.tensor_shape.dim.add().size = d
            out.float_val.extend(y.ravel().tolist())
            return resp

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=a.threads))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
    server.add_insecure_port("127.0.0.1:%d" % a.port)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
