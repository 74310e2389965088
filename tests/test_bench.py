"""`make bench` still runs: one small layer, one round, both gradients, in a child
process; every row names the CPU variant that ran. Nothing here is timed."""
import json
import os
import subprocess
import sys

from tf_conv_backprop import _variants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_rows_name_their_variant(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "bench.py"), "--family", "depthwise",
         "--shape", "C960 @7", "--configs", "float32:NHWC,float32:NCHW", "--rounds", "1",
         "--batch", "1", "--peak-gflops", "100", "--peak-gbs", "10", "--json", str(out),
         "--plot", ""],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    names = {r["name"] for r in _variants.table()}
    assert len(rows) == 4
    for row in rows:
        assert "error" not in row, row
        assert row["variant"] in names, row
    assert "CPU variant" in proc.stdout


def test_bench_grouped_rows_at_a_capped_isa(tmp_path):
    """A grouped layer at --isa avx2: TF's forward time is its reference (fwd/ours), the
    JSON names the CPU and the oneDNN cap, and ours ran a variant of the table. The FMA
    peak is measured (by the library's loop at the capped ISA): the rows' fraction of the
    peak and the summary's 3x3 line come from it."""
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "bench.py"), "--family", "grouped",
         "--shape", "g32 1024->1024", "--configs", "float32:NHWC", "--rounds", "1",
         "--batch", "1", "--peak-gbs", "10", "--isa", "avx2",
         "--json", str(out), "--plot", ""],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["onednn"] == {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert report["isa"] == "avx2" and report["cpu"]
    names = {r["name"] for r in _variants.table()}
    assert len(report["rows"]) == 2
    for row in report["rows"]:
        assert "error" not in row, row
        assert row["variant"] in names, row
        assert row["forward_over_ours"] is not None, row
    fma = report["peaks"]["fma_gflops"]
    assert fma > 0 and report["peaks"]["gemm_gflops"] > 0, report["peaks"]
    for row in report["rows"]:
        assert abs(row["peak_fraction"] - row["ours_gflops"] / fma) < 1e-9 * fma, row
    (summary,) = report["summary"]
    assert summary["median_3x3_fma_fraction"] > 0, summary
