"""tf.distribute on TF's own engine: the small CNN (tf_conv_backprop.keras layers,
float64, dilated) trained for 20 steps

- under MirroredStrategy over two logical CPU devices (one process: the devices must
  be configured before TF initialises), and
- under MultiWorkerMirroredStrategy with two worker processes on 127.0.0.1 (TF_CONFIG,
  free ports chosen at run time),

ends at the weights of the single-process run. The same processes first run the
README's distributed examples (mirrored.py, worker.py) as written and reuse their
strategy (see cnn.py). All three processes start at once, run under a time limit, write
to files (no pipe can fill up and stall a worker), and are killed in `finally` whatever
happens."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import cnn
import readme
import tf_conv_backprop as tcb

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tcb.__file__)))
TIMEOUT_S = 150
ATOL = 1e-10  # float64; the all-reduce sums in another order than the single run


def _free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distribute")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    examples = readme.write_examples(tmp)
    jobs = {"mirrored": ("mirrored", env, examples["mirrored.py"])}
    for i in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
        jobs[f"worker{i}"] = ("worker", dict(env, TF_CONFIG=json.dumps(tf_config)),
                              examples["worker.py"])
    procs, logs = {}, {}
    try:
        for key, (mode, job_env, example) in jobs.items():
            logs[key] = open(tmp / f"{key}.log", "w+")
            procs[key] = subprocess.Popen(
                [sys.executable, os.path.join(TESTS_DIR, "cnn.py"), mode, str(tmp / f"{key}.npz"),
                 example], cwd=str(tmp), env=job_env, stdout=logs[key], stderr=subprocess.STDOUT)
        x, y = cnn.data(dtype=cnn.DISTRIBUTED_BUILD["dtype"])
        single = cnn.train(cnn.build(True, **cnn.DISTRIBUTED_BUILD), x, y)
        results = {}
        for key, proc in procs.items():
            try:
                rc = proc.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                rc = "timeout"
            logs[key].seek(0)
            log = logs[key].read()
            if rc != 0:
                results[key] = f"{key}: rc={rc} ({' '.join(workers)})\n{log[-4000:]}"
                continue
            with np.load(tmp / f"{key}.npz") as npz:
                weights = [npz[f"w{i}"] for i in range(len(npz.files) - 1)]
                results[key] = (list(npz["losses"]), weights, log)
        yield single, results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in logs.values():
            log.close()


def _check(runs, key):
    (single_losses, single_weights), results = runs
    res = results[key]
    assert not isinstance(res, str), res
    losses, weights, _ = res
    assert losses[-1] < 0.75 * losses[0], f"{key} did not train: {losses}"
    np.testing.assert_allclose(losses, single_losses, rtol=ATOL, atol=ATOL, err_msg=key)
    assert len(weights) == len(single_weights)
    for i, (a, b) in enumerate(zip(weights, single_weights)):
        np.testing.assert_allclose(a, b, rtol=ATOL, atol=ATOL, err_msg=f"{key}: weight {i}")


def test_mirrored_two_logical_cpus(runs):
    _check(runs, "mirrored")


@pytest.mark.parametrize("worker", [0, 1])
def test_multi_worker_mirrored(runs, worker):
    _check(runs, f"worker{worker}")


def test_readme_examples_ran(runs):
    """The README's mirrored.py and worker.py ran first in these processes (their
    strategy is the one the checks above used)."""
    _, results = runs
    for key in ("mirrored", "worker0", "worker1"):
        assert not isinstance(results[key], str), results[key]
    for i in range(2):
        assert f"worker {i} loss" in results[f"worker{i}"][2], results[f"worker{i}"][2][-2000:]
