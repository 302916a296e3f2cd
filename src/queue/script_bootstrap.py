"""tensorhub's bootstrap of script tasks (TaskSpec::script, src/queue/runner.cpp).

A runner runs a script task as

    PYTHON script_bootstrap.py SCRIPT_PATH SAVED_RESULT_KEYS_JSON

in the task's environment (TENSORHUB_HYPER_PARAMETERS, TENSORHUB_RESULT_FILE, ...). As TensorHub
did with exec(), the script runs with each hyperparameter bound as one of its global variables,
and at its end the global variables named by saved_result_keys become the task's result; unlike
TensorHub, it runs in a child process of its own, as `python3 SCRIPT` runs a file: module
__main__, compiled and run by the import system's SourceFileLoader (no exec of strings, no
pickle). The bootstrap is embedded in the tensorhub runner and written beside the script, so
a runner needs no file installed with it. It imports little before the script's first line
(not runpy, whose imports cost milliseconds; traceback only on failure).

Exit status: the script's own when it calls sys.exit; 1, with the traceback on stderr and a last
line naming the exception, when it raises or a saved key is missing or not JSON-serialisable.
"""

import json
import math
import os
import sys
from importlib.machinery import SourceFileLoader

_NUMBER_DOUBLE = "$numberDouble"


def _decode_non_finite(obj):
    """{"$numberDouble": "NaN"} (as the runner passes non-finite values) -> float("nan")."""
    if len(obj) == 1 and _NUMBER_DOUBLE in obj and isinstance(obj[_NUMBER_DOUBLE], str):
        return float(obj[_NUMBER_DOUBLE])
    return obj


def _hyper_parameters():
    text = os.environ.get("TENSORHUB_HYPER_PARAMETERS", "{}")
    return json.loads(text, object_hook=_decode_non_finite)


def _json_value(key, value, path):
    """`value` as JSON data: numpy scalars through .item(), NaN and infinities in their
    {"$numberDouble": ...} form (as TaskContext::set_result writes them). Raises TypeError
    naming the saved key and where in it for anything else."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {_NUMBER_DOUBLE: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if type(value).__module__ == "numpy" and type(value).__name__ != "ndarray" and hasattr(value, "item"):
        return _json_value(key, value.item(), path)  # a numpy scalar: np.float32(0.5), np.int64(3)
    if isinstance(value, (list, tuple)):
        return [_json_value(key, v, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError("saved_result_keys entry %r: %s has a key %r that is not a string" % (key, path, k))
            out[k] = _json_value(key, v, "%s[%r]" % (path, k))
        return out
    raise TypeError("saved_result_keys entry %r: %s is a %s.%s, which is not JSON data; store a number, string, "
                    "bool, list or dict (e.g. float(x) or x.item())"
                    % (key, path, type(value).__module__, type(value).__qualname__))


def _result(script_globals, keys):
    """The saved keys' values, merged into what the script may have written itself (the
    tensorhub package's set_result writes the same file)."""
    missing = [k for k in keys if k not in script_globals]
    if missing:
        raise KeyError("saved_result_keys %s: the script has no global variable of that name "
                       "(set it at the script's top level)" % ", ".join(missing))
    path = os.environ.get("TENSORHUB_RESULT_FILE", "")
    result = {}
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    for k in keys:
        result[k] = _json_value(k, script_globals[k], k)
    return path, result


def _fail(script, exc):
    """Prints the traceback from the script's first frame on (the bootstrap's and the import
    system's own frames are noise), then one line naming the exception and where in the script
    it was raised (the runner takes a task's last output line into its error), and exits 1."""
    import traceback  # here, not at the top: only a failing script pays for it

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == script:
            where = "%s line %d" % (os.path.basename(script), frame.lineno)
            break
    message = str(exc).strip().splitlines()
    text = "%s: %s" % (type(exc).__name__, message[0]) if message else type(exc).__name__
    print("tensorhub: %s raised %s" % (where or "the script", text), file=sys.stderr, flush=True)
    sys.exit(1)


def _write_result(script_globals, keys):
    """Writes the task's result; exits 1 with one line saying why when a key is missing or its
    value is not JSON data."""
    try:
        path, result = _result(script_globals, keys)
    except (KeyError, TypeError, ValueError) as exc:
        print("tensorhub: the script ended, but %s" % (exc.args[0] if exc.args else exc), file=sys.stderr, flush=True)
        sys.exit(1)
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, allow_nan=False)
        os.replace(tmp, path)


class _ScriptLoader(SourceFileLoader):
    """Loads the script as SourceFileLoader does, but writes no __pycache__ beside it (as
    `python3 SCRIPT` writes none for its script)."""

    def set_data(self, path, data, **kwargs):
        pass


def _run_script(script, init_globals):
    """Runs the file `script` as module __main__, its globals starting as `init_globals`, and
    returns its globals (what runpy.run_path does, without runpy's imports)."""
    module = type(sys)("__main__")  # types.ModuleType, without importing types
    module.__dict__.update(init_globals)
    loader = _ScriptLoader("__main__", script)
    module.__file__, module.__loader__, module.__spec__, module.__package__ = script, loader, None, None
    sys.modules["__main__"] = module  # so that classes the script defines pickle as __main__'s
    loader.exec_module(module)
    return module.__dict__


def main():
    if len(sys.argv) != 3:
        print("usage: script_bootstrap.py SCRIPT SAVED_RESULT_KEYS_JSON (tensorhub runners run it)", file=sys.stderr)
        return 2
    script, keys = os.path.abspath(sys.argv[1]), json.loads(sys.argv[2])
    sys.argv = [script]
    sys.path[0] = os.path.dirname(script)  # as `python3 SCRIPT` would have it
    try:
        script_globals = _run_script(script, _hyper_parameters())
    except (Exception, KeyboardInterrupt) as exc:  # SystemExit passes: the script's own status
        _fail(script, exc)
    _write_result(script_globals, keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
