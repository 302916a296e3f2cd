"""TensorLayer TensorHub's examples/database/task_script.py in PyTorch, over tensorhub.

A runner runs it with the task's hyperparameters n_units1, n_units2 and epochs bound as global
variables; at its end the global test_accuracy (dispatch_tasks.py's saved_result_keys) becomes
the task's result. It trains TensorHub's MLP (Dropout 0.2, Dense n_units1 ReLU, Dropout 0.5,
Dense n_units2 ReLU, Dropout 0.5, Dense 10; Adam 1e-4, batch 256) on dataset "mnist",
reports each epoch, and saves the network as model "mlp" with its test accuracy.
"""

import os

# OpenMP threads sleep between torch's ops instead of spinning: on cores other processes use too,
# spinning made an epoch ~8x slower (30 s instead of 3.5 s for 10,000 images on 2 busy cores).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch
import torch.nn.functional as F
from torch import nn

import tensorhub

torch.set_num_threads(int(os.environ.get("TENSORHUB_NUM_THREADS") or 0) or os.cpu_count())
ctx = tensorhub.task_context()
db = tensorhub.TensorHub()  # the runner's hub and project (TENSORHUB_URI, TENSORHUB_PROJECT)

dataset = db.find_top_dataset("mnist")
if dataset is None:
    raise SystemExit(f"no dataset mnist in project {db.project_name} of {db.uri}: run dispatch_tasks.py first")
X_train, y_train, X_val, y_val, X_test, y_test = (torch.from_numpy(a) for a in dataset)
class_names = db.list_datasets("mnist", sort=[("time", -1)])[0].get("class_names")

net = nn.Sequential(
    nn.Dropout(0.2), nn.Linear(784, n_units1), nn.ReLU(),
    nn.Dropout(0.5), nn.Linear(n_units1, n_units2), nn.ReLU(),
    nn.Dropout(0.5), nn.Linear(n_units2, 10))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
batch_size = 256


def evaluate(X, y):
    """(mean cross-entropy, accuracy) of `net` in inference mode on X [n, 784], y [n]."""
    net.eval()
    with torch.no_grad():
        logits = torch.cat([net(X[i:i + 1000]) for i in range(0, len(X), 1000)])
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).double().mean().item()


for epoch in range(epochs):
    net.train()
    loss_sum, correct = 0.0, 0
    for batch in torch.randperm(len(X_train)).split(batch_size):
        logits = net(X_train[batch])
        loss = F.cross_entropy(logits, y_train[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * len(batch)
        correct += (logits.argmax(1) == y_train[batch]).sum().item()
    val_loss, val_accuracy = evaluate(X_val, y_val)
    logs = {"loss": loss_sum / len(X_train), "accuracy": correct / len(X_train), "val_loss": val_loss,
            "val_accuracy": val_accuracy}
    ctx.report_epoch(epoch, logs)  # `tensorhub task list|show` and the dashboard follow it
    print(f"epoch {epoch + 1}/{epochs}: " + ", ".join(f"{k} {v:.4f}" for k, v in logs.items()), flush=True)

test_loss, test_accuracy = evaluate(X_test, y_test)  # evaluate() left net in inference mode, as saved
print(f"test_accuracy {test_accuracy:.4f} test_loss {test_loss:.4f}", flush=True)
db.save_model(net, "mlp", name=f"{n_units1}-{n_units2}", test_accuracy=test_accuracy, test_loss=test_loss,
              n_units1=n_units1, n_units2=n_units2, epochs=epochs, learning_rate=1e-4, batch_size=batch_size,
              task_id=ctx.task_id, class_names=class_names)
