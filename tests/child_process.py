"""Runs one mode of a test script in a fresh Python process, so a crash, a hang or
an out-of-memory kill fails the test instead of the test run, and the child's
memory is measured without the parent's. The child prints `RESULT <json>`."""
import json
import os
import subprocess
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")


def run_child(script, mode, extra_env=None, drop_env=(), timeout=600, context=""):
    env = dict(os.environ)
    for name in drop_env:
        env.pop(name, None)
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join([_PYTHON_DIR, _HERE] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cmd = [sys.executable, os.path.abspath(script), mode]
    shown = " ".join(cmd)
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"HANG: `{shown}` did not finish in {timeout} s")
    tail = (proc.stdout + "\n" + proc.stderr)[-8000:]
    if proc.returncode < 0:
        pytest.fail(f"CRASH (signal {-proc.returncode}, 9 = OOM kill): `{shown}`\n{tail}")
    assert proc.returncode == 0, f"`{shown}` failed {context}:\n{tail}"
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no RESULT line from `{shown}`:\n{tail}")
