"""PyTorch modules saved from Python served by the real ``tensorhub serve --hub_model`` (C++,
libtorch, no Python): save_model stores TorchScript (scripted, or traced with example_input)
as the model part "model.pt"; the server's predictions are compared with the module's own
output computed here by torch in eval mode. A module that can be neither scripted nor traced
is saved with a warning, and the server says why it cannot serve it and how to fix that."""

import json
import socket
import subprocess
import time
import warnings

import pytest

import tensorhub
from conftest import cli_path, http_json, run_cli

torch = pytest.importorskip("torch")
nn = torch.nn


class Mlp(nn.Module):
    """Linear + ReLU + Dropout + Linear: torch.jit.script compiles it."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 8)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.hidden(x))))


class VarArgs(nn.Module):
    """A forward of *inputs, which torch.jit.script refuses ("Compiled functions can't take
    variable number of arguments"); torch.jit.trace records it. Dropout shows that the trace
    ran in eval mode."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.drop = nn.Dropout(0.5)

    def forward(self, *inputs):
        return torch.tanh(self.drop(self.lin(inputs[0]))) * 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``tensorhub serve`` process serving `model_name` (from a hub: ``--hub_model``; else
    from the flags `source`) on a free port, its log in a file."""

    def __init__(self, hub_uri: str, model_name: str, log_path, source=None):
        cli = cli_path()
        if not cli.exists():
            pytest.skip(f"{cli} is not built")
        self.port = _free_port()
        self.model_name = model_name
        self.log_path = log_path
        self._log = open(log_path, "w")
        source = source or ["--hub", hub_uri, "--project", "test", "--hub_model", model_name]
        self.proc = subprocess.Popen([str(cli), "serve", *source, "--rest_api_port", str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def predict(self, instances):
        return http_json(f"http://127.0.0.1:{self.port}/v1/models/{self.model_name}:predict", {"instances": instances})

    def wait_for(self, done, what: str, seconds: float = 60):
        """The first (status, reply) of predict-like polls for which done(status, reply) holds."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"tensorhub serve exited {self.proc.returncode}:\n{self.log()}"
            status, reply = done()
            if status:
                return status, reply
            time.sleep(0.2)
        pytest.fail(f"tensorhub serve: {what} did not happen in {seconds} s:\n{self.log()}")

    def wait_available(self):
        def available():
            status, reply = http_json(f"http://127.0.0.1:{self.port}/v1/models/{self.model_name}")
            ok = status == 200 and any(v["state"] == "AVAILABLE" for v in reply["model_version_status"])
            return (status, reply) if ok else (0, None)
        self.wait_for(available, f"model {self.model_name} AVAILABLE")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def serve(hub_uri, tmp_path):
    """serve(model_name, source=None): a started Server on the test's hub (or of the flags
    `source`), stopped after the test."""
    started = []

    def start(model_name, source=None):
        server = Server(hub_uri, model_name, tmp_path / f"serve-{model_name}.log", source)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def _expected(module, x):
    """The module's own output for `x` in eval mode (Dropout off), computed by torch."""
    module.eval()
    with torch.no_grad():
        return module(x).numpy()


def _no_torchscript_warnings(caught):
    return [str(w.message) for w in caught if "without TorchScript" in str(w.message)]


def test_scripted_module_is_served_as_torch_computes_it(hub, serve):
    torch.manual_seed(0)
    net = Mlp()  # in train mode: save_model must compile it for eval, and leave it in train mode
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model_id = hub.save_model(net, "mlp", test_accuracy=0.9)
    assert _no_torchscript_warnings(caught) == []
    assert net.training and net.drop.training
    stored = hub.find_top_model("mlp")
    assert stored.id == model_id and stored.has_torchscript
    assert stored.architecture == {"format": "pytorch_state_dict", "module": f"{Mlp.__module__}.Mlp",
                                   "torchscript": "script"}
    x = torch.randn(5, 4)
    expected = _expected(net, x)
    with torch.no_grad():
        torch.testing.assert_close(stored.torchscript()(x).numpy(), expected)

    server = serve("mlp")
    server.wait_available()
    status, reply = server.predict(x.tolist())
    assert status == 200, (reply, server.log())
    predictions = torch.tensor(reply["predictions"]).numpy()
    assert predictions.shape == (5, 3)
    torch.testing.assert_close(predictions, expected, rtol=1e-5, atol=1e-5)


def test_unscriptable_module_is_traced_with_example_input_and_served(hub, serve):
    torch.manual_seed(1)
    net = VarArgs()
    with pytest.raises(Exception):
        torch.jit.script(net)  # the premise: scripting fails
    x = torch.randn(6, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hub.save_model(net, "varargs", example_input=torch.zeros(2, 4))
    assert _no_torchscript_warnings(caught) == []
    assert net.training
    stored = hub.find_top_model("varargs")
    assert stored.architecture["torchscript"] == "trace"
    assert "example_input" not in stored.tags
    expected = _expected(net, x)

    server = serve("varargs")
    server.wait_available()
    status, reply = server.predict(x.tolist())
    assert status == 200, (reply, server.log())
    torch.testing.assert_close(torch.tensor(reply["predictions"]).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_without_torchscript_a_warning_and_the_server_says_how_to_fix_it(hub, serve):
    net = VarArgs()
    with pytest.warns(UserWarning, match=r"save_model: plain is saved without TorchScript, so tensorhub serve "
                                         r"cannot serve it: torch\.jit\.script failed \(.*\) and no example_input"):
        hub.save_model(net, "plain")
    stored = hub.find_top_model("plain")
    assert "torchscript" not in stored.architecture and not stored.has_torchscript
    assert stored.torchscript() is None
    assert set(stored.state_dict()) == {"lin.weight", "lin.bias"}
    # An example the module cannot take: both failures are named.
    with pytest.warns(UserWarning, match=r"torch\.jit\.trace with the example_input failed"):
        hub.save_model(net, "wrong_example", example_input=torch.zeros(2, 5))

    server = serve("plain")

    def refused():
        status, reply = server.predict([[0.0] * 4])
        return (status, reply) if status and "cannot be served" in reply.get("error", "") else (0, None)

    status, reply = server.wait_for(refused, "the refusal of the state_dict model")
    # Its only version failed to load: TF Serving's 404 ("Servable not found for request").
    assert status == 404, reply
    assert f"hub model {stored.id} is a PyTorch state_dict (module {VarArgs.__module__}.VarArgs) without " \
           "TorchScript, which cannot be served" in reply["error"]
    assert "example_input=x" in reply["error"]
    assert "is a PyTorch state_dict" in server.log()


def test_example_input_is_a_keyword_not_a_tag(hub):
    with pytest.raises(tensorhub.InvalidArgument, match="did you mean example_input"):
        hub.save_model(VarArgs(), "m", example_inputs=torch.zeros(1, 4))
    with pytest.raises(tensorhub.InvalidArgument, match="example_input= traces a torch.nn.Module"):
        hub.save_model({"w": torch.zeros(2)}, "m", example_input=torch.zeros(1))
    assert hub.find_models() == []


def test_model_fetch_writes_model_pt_served_from_files_and_saved_again(hub, tmp_path, serve):
    torch.manual_seed(2)
    net = Mlp()
    hub.save_model(net, "mlp")
    out = tmp_path / "base" / "1"  # a version directory of --model_base_path
    run_cli("model", "fetch", "--model-name", "mlp", "--output", str(out), "--hub", hub._core.uri, "--project", "test")
    assert sorted(p.name for p in out.iterdir()) == ["model.json", "model.pt", "weights.safetensors"]
    assert json.loads((out / "model.json").read_text())["torchscript"] == "script"
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.load(str(out / "model.pt"))(x).numpy(), _expected(net, x))
    # Served from files: model.json names a Python module, so model.pt runs.
    server = serve("files", ["--model_name", "files", "--model_base_path", str(tmp_path / "base")])
    server.wait_available()
    status, reply = server.predict(x.tolist())
    assert status == 200, (reply, server.log())
    torch.testing.assert_close(torch.tensor(reply["predictions"]).numpy(), _expected(net, x), rtol=1e-5, atol=1e-5)
    run_cli("model", "save", "--model-name", "again", "--path", str(out), "--hub", hub._core.uri, "--project", "test")
    again = hub.find_top_model("again")
    assert again.has_torchscript and again.architecture["format"] == "pytorch_state_dict"
    assert (out / "model.pt").read_bytes() == hub._core.load_model_part(again._document_text, "model.pt")
    # model.pt beside a model.json of tensorhub's own layers: which one to serve is unclear.
    (out / "model.json").write_text(json.dumps({"input_shape": [4], "layers": [{"type": "Dense", "units": 3}]}))
    done = subprocess.run([str(cli_path()), "model", "save", "--model-name", "mixed", "--path", str(out), "--hub",
                           hub._core.uri, "--project", "test"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "holds model.pt beside a model.json of tensorhub layers" in done.stderr
    assert hub.find_top_model("mixed") is None
