"""Every bad-input case of bad_inputs.py, eagerly and in a tf.function, each run in a
crash-isolating worker process: an abort, SIGFPE or segfault in the op kills only the
worker and fails that one test (with the case id); a hang fails it after a timeout. The
next test gets a fresh worker."""
import concurrent.futures
import multiprocessing
import os
from concurrent.futures.process import BrokenProcessPool

import pytest

import bad_inputs
from bad_inputs import CASE_IDS, CASES, CASES_BY_ID, MODES
from op_table import ops as _ops

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON_DIR = os.path.join(os.path.dirname(_HERE), "python")

CALL_TIMEOUT_S = 60     # one case, in a warm worker
START_TIMEOUT_S = 180   # a fresh worker: import TensorFlow, load the op library
TF_ERROR_CLASSES = {"InvalidArgumentError", "UnimplementedError", "ResourceExhaustedError",
                    "OutOfRangeError", "FailedPreconditionError"}


class IsolatedRunner:
    """Runs module-level functions in one spawned worker process and restarts it after
    a crash or a hang. `call` returns the function's result, or
    {"outcome": "crashed" | "timeout", ...} when the worker died or did not answer."""

    def __init__(self):
        self._pool = None
        self._procs = []      # the worker process(es) this runner started
        self.restarts = 0

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx)
        # Importing TF dominates a fresh worker; do it once, under a generous timeout.
        result = self._submit(bad_inputs.warm_up, timeout=START_TIMEOUT_S)
        if not isinstance(result, int):
            raise RuntimeError(f"the worker failed to start: {result}")

    def _drop(self, kill):
        """Forgets the pool; with kill=True first kills our (hung) worker by its handle."""
        if kill:
            for p in self._procs:
                if p.is_alive():
                    p.kill()
        for p in self._procs:
            p.join(timeout=10)
        codes = [p.exitcode for p in self._procs]
        pool, self._pool, self._procs = self._pool, None, []
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self.restarts += 1
        return codes

    def _submit(self, fn, *args, timeout):
        future = self._pool.submit(fn, *args)
        # Remember the worker now: a broken pool forgets its processes.
        self._procs = list((getattr(self._pool, "_processes", None) or {}).values()) or self._procs
        try:
            return future.result(timeout=timeout)
        except BrokenProcessPool as e:
            return {"outcome": "crashed", "exitcodes": self._drop(kill=False), "detail": repr(e)}
        except concurrent.futures.TimeoutError:
            self._drop(kill=True)
            return {"outcome": "timeout", "timeout_s": timeout}

    def call(self, fn, *args, timeout=CALL_TIMEOUT_S):
        if self._pool is None:
            self._start()
            if self._pool is None:   # the warm-up itself crashed or hung
                raise RuntimeError("could not start a worker")
        return self._submit(fn, *args, timeout=timeout)

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def isolated_runner(**env):
    """An IsolatedRunner whose spawned worker imports tf_conv_backprop and bad_inputs
    from the source tree (conftest.py only fixes the parent's sys.path), keeps TF quiet
    and sees `env`; a generator for module fixtures (the environment is restored)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", *env)}
    paths = [_PYTHON_DIR, _HERE] + ([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else [])
    os.environ.update(PYTHONPATH=os.pathsep.join(paths), TF_CPP_MIN_LOG_LEVEL="2", **env)
    r = IsolatedRunner()
    try:
        yield r
    finally:
        r.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def runner():
    yield from isolated_runner()


def _describe(case):
    return (f"[{case.id}] op={case.op} sizes={case.sizes} data={case.data_shape} "
            f"dy={case.dy_shape} strides={case.strides} padding={case.padding} "
            f"format={case.data_format} dilations={case.dilations} dtype={case.dtype}"
            + (f" raw explicit_paddings={case.explicit_paddings}" if case.raw else "")
            + (f" ({case.note})" if case.note else ""))


def check_result(case, mode, result):
    where = f"{_describe(case)} mode={mode}"
    exp = case.expect
    if result.get("outcome") == "crashed":
        pytest.fail(f"CRASH: the worker died (exit codes {result.get('exitcodes')}) on {where}")
    if result.get("outcome") == "timeout":
        pytest.fail(f"HANG: no result within {result.get('timeout_s')} s on {where}")
    if exp.kind == "error":
        assert result["outcome"] == "error", (
            f"{where}: expected {exp.classes_for(mode)} naming one of {exp.names_for(mode)}, "
            f"got a result: {result}")
        classes = exp.classes_for(mode)
        assert result["class"] in classes, (
            f"{where}: expected {classes}, got {result['class']}: {result['message'][:600]}")
        if exp.stage == "kernel":
            # Only the op itself may reject these: never a Python-level error.
            assert result["class"] in TF_ERROR_CLASSES, f"{where}: {result}"
        names = exp.names_for(mode)
        if names:
            assert any(n in result["message"] for n in names), (
                f"{where}: message does not name any of {names}: "
                f"{result['class']}: {result['message'][:600]}")
        return
    assert result["outcome"] == "ok", (
        f"{where}: expected a {exp.kind} result of shape {exp.shape}, got "
        f"{result.get('class')}: {result.get('message', '')[:600]}")
    assert result["shape"] == exp.shape, f"{where}: shape {result['shape']} != {exp.shape}"
    assert result["finite"], f"{where}: non-finite values (NaN/Inf) in the result"
    if exp.kind == "zeros":
        assert result["all_zero"], f"{where}: expected all zeros, got nonzero values"
    if exp.reference:
        ref = result.get("ref_error")
        assert isinstance(ref, float), f"{where}: {ref}"
        assert _ops.within(ref, case.dtype, case.reduction_length), (
            f"{where}: relative error vs reference {ref}")


PARAMS = [pytest.param(cid, mode, id=f"{cid}-{mode}") for cid in CASE_IDS for mode in MODES]


@pytest.mark.parametrize("case_id,mode", PARAMS)
def test_bad_input(runner, case_id, mode):
    result = runner.call(bad_inputs.run_case, case_id, mode)
    check_result(CASES_BY_ID[case_id], mode, result)


def test_isolation_reports_crash_and_recovers(runner):
    """A worker killed by SIGABRT is reported as a crash, not a dead test run, and the
    next call runs in a fresh worker."""
    good = "S2_BI_empty_filter"
    assert runner.call(bad_inputs.run_case, good, "eager")["outcome"] == "ok"
    crashed = runner.call(bad_inputs.abort_worker)
    # The exit code is informative only: the pool may reap the dead worker first.
    assert crashed["outcome"] == "crashed", crashed
    after = runner.call(bad_inputs.run_case, good, "function")
    check_result(CASES_BY_ID[good], "function", after)
    with pytest.raises(pytest.fail.Exception, match="CRASH"):
        check_result(CASES_BY_ID[good], "eager", crashed)


def test_isolation_reports_hang_and_recovers(runner):
    """A call that outlives its timeout is reported, its worker killed, and the next call
    runs."""
    hung = runner.call(bad_inputs.hang_worker, 600, timeout=2)
    assert hung["outcome"] == "timeout", hung
    after = runner.call(bad_inputs.run_case, "S12_BI_empty_out_backprop_f64", "eager")
    check_result(CASES_BY_ID["S12_BI_empty_out_backprop_f64"], "eager", after)


def test_corpus_size_and_coverage():
    assert len(CASES) >= 120
    ids = " ".join(CASE_IDS)
    for tag in [f"S{i}" for i in range(1, 17)] + [f"F{i}" for i in range(1, 11)] + \
            ["N1", "N2", "N3", "N5"]:
        assert f"{tag}_" in ids or f"{tag}a_" in ids or f"{tag}b_" in ids, tag
    for op in bad_inputs.OPS:
        for fmt in ("NHWC", "NCHW"):
            assert any(c.op == op and c.data_format == fmt and c.expect.kind == "zeros"
                       for c in CASES), (op, fmt)
    # Python-level classes are allowed only where the table says the error is raised
    # before our kernel.
    for c in CASES:
        if c.expect.kind == "error" and c.expect.stage == "kernel":
            for mode in MODES:
                assert not set(c.expect.classes_for(mode)) & {"ValueError", "TypeError"}, c.id
