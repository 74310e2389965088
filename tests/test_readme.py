"""The README's "Training" examples run as written. training.py, patching.py and
save.py run here; load.py runs in a fresh process (as the README says it must) under a
time limit. mirrored.py and worker.py run inside test_distribute.py's processes, before
its own checks (they must own a fresh process: device set-up, TF_CONFIG)."""
import os
import runpy
import subprocess
import sys

import pytest

import readme
import tf_conv_backprop as tcb

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tcb.__file__)))
TIMEOUT_S = 120


def test_examples_present():
    assert set(readme.training_examples()) == set(readme.NAMES)


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    return readme.write_examples(tmp, replace=[("/tmp/tcb_net", str(tmp / "tcb_net"))])


@pytest.mark.parametrize("name", ["training.py", "patching.py"])
def test_example_runs(examples, name):
    runpy.run_path(examples[name], run_name="__main__")


def test_save_then_load_in_fresh_process(examples):
    runpy.run_path(examples["save.py"], run_name="__main__")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen([sys.executable, examples["load.py"]],
                            cwd=os.path.dirname(examples["load.py"]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-4000:]
    assert "(1, 16, 16, 8)" in out, out[-2000:]
