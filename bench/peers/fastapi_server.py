#!/usr/bin/python3
# Origin: the project's shared peers (shared/peers/fastapi_server.py), copied unchanged below this line so that
# a clone of tensorhub alone can benchmark.
"""Peer: FastAPI + uvicorn + PyTorch serving TF Serving's predict route for two models.
Run:  /usr/bin/python3 fastapi_server.py --port 18501 --workers 2
"""
import argparse, os, sys
import torch
from fastapi import FastAPI, Request

torch.set_num_threads(1)
torch.manual_seed(0)
nn = torch.nn
mlp = nn.Sequential(nn.Linear(784, 800), nn.ReLU(), nn.Linear(800, 800), nn.ReLU(),
                    nn.Linear(800, 10), nn.Softmax(dim=1)).eval()
app = FastAPI()

@app.post("/v1/models/mlp:predict")
async def predict_mlp(req: Request):
    body = await req.json()
    x = torch.tensor(body["instances"], dtype=torch.float32).reshape(-1, 784)
    with torch.no_grad():
        return {"predictions": mlp(x).tolist()}

@app.post("/v1/models/half_plus_two:predict")
async def predict_hp2(req: Request):
    body = await req.json()
    return {"predictions": [0.5 * v + 2 for v in body["instances"]]}

if __name__ == "__main__":
    import uvicorn
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18501)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    uvicorn.run("fastapi_server:app", host="127.0.0.1", port=a.port, workers=a.workers, log_level="warning")
