"""Fixtures of the tensorhub Python tests: the build to test (TENSORHUB_BUILD_DIR, default
build/: its python/ holds the package, its bin/ the command line), and a fresh, empty hub on
each backend (SQLite: a new file; PostgreSQL: a new database on the server named by
TENSORHUB_TEST_POSTGRES_URI, which scripts/test starts, dropped afterwards), as
tests/backend_factory.h does for the C++ suites."""

import itertools
import json
import os
import pathlib
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_DIR = pathlib.Path(os.environ.get("TENSORHUB_BUILD_DIR", ROOT / "build")).resolve()
if str(BUILD_DIR / "python") not in sys.path:
    sys.path.insert(0, str(BUILD_DIR / "python"))

NO_POSTGRES = "PostgreSQL tests need TENSORHUB_TEST_POSTGRES_URI (scripts/test starts a private server and sets it)"
_counter = itertools.count()


def sigint_as_at_a_terminal() -> None:
    """A Popen preexec_fn: SIGINT back to its default in the child. A shell starts background
    jobs (`cmd &`, nohup) with SIGINT ignored, the child inherits that, and Python then installs
    no KeyboardInterrupt handler: a Ctrl-C test would hang though the code is right."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli_path() -> pathlib.Path:
    """The tensorhub command line to check against: TENSORHUB_CLI, else <build>/bin/tensorhub."""
    return pathlib.Path(os.environ.get("TENSORHUB_CLI", BUILD_DIR / "bin" / "tensorhub"))


def run_cli(*args: str, env=None) -> str:
    """Runs the command line; returns its stdout, failing the test with its stderr."""
    cli = cli_path()
    if not cli.exists():
        pytest.skip(f"{cli} is not built")
    done = subprocess.run([str(cli), *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, f"tensorhub {' '.join(args)}: exit {done.returncode}\n{done.stderr}"
    return done.stdout


def http_json(url: str, body=None):
    """(HTTP status, JSON reply) of GET (body None) or POST of `body` as JSON to `url`; (0, None)
    while nothing listens there (a server still starting)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (urllib.error.URLError, ConnectionError):
        return 0, None


def _with_database(uri: str, name: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def _psql(admin_uri: str, sql: str) -> None:
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", admin_uri, "-c", sql], check=True,
                   capture_output=True, timeout=60)


@pytest.fixture(params=["sqlite", "postgresql"])
def hub_uri(request, tmp_path):
    """The URI of a fresh, empty hub database on each backend."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'hub.db'}"
        return
    admin = os.environ.get("TENSORHUB_TEST_POSTGRES_URI")
    if not admin:
        pytest.skip(NO_POSTGRES)
    name = f"th_pytest_{os.getpid()}_{next(_counter)}"
    _psql(admin, f"CREATE DATABASE {name}")
    try:
        yield _with_database(admin, name)
    finally:
        _psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def hub(hub_uri):
    """A TensorHub of project "test" on a fresh hub of each backend."""
    import tensorhub

    with tensorhub.TensorHub(hub_uri, project_name="test") as db:
        yield db
