"""`make tf-matrix`: the library built, installed and checked against each supported
TensorFlow. For each version:

  1. build: `make wheel TF_VERSION=V` (its own git-ignored venv .venv-tfV and build
     folder build-tfV; the wheel in dist/tfV/);
  2. install: a fresh venv (removed afterwards) gets tensorflow==V, the wheel and pytest
     from pip; nothing else of the source tree;
  3. check, there, with no compiler reachable: build_tools/check_install.py (the 14 public
     names against TF, eagerly and under XLA), the parity, XLA and training tests
     (tests/test_parity.py, test_xla.py, test_training.py: TF's built-ins, the float64
     reference, a Keras fit) run against the installed package, and
     `python -m tf_conv_backprop info`, which must find the build info matching.

Prints a table (version, Keras, build / install / check seconds, result), writes it to
--json, and exits non-zero when any version fails. Logs: build-tfV/tf-matrix.log.

    python build_tools/tf_matrix.py [--versions 2.16.2 2.21.0] [--cuda 0|auto|1]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every TensorFlow the source builds against: the newest patch release of each minor
# version PyPI serves for Python 3.11. setup.py's supported range and the isolated
# build's default (build_backend.py, the newest) come from here.
VERSIONS = ("2.16.2", "2.17.1", "2.18.1", "2.19.1", "2.20.0", "2.21.0")
TESTS = ("tests/test_parity.py", "tests/test_xla.py", "tests/test_training.py")
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "ld", "nvcc")


class StepFailed(Exception):
    pass


def run(step, args, log, timeout, **kwargs):
    """Runs one step, its output appended to `log`; StepFailed names the step."""
    log.write(f"\n$ {' '.join(args)}\n")
    log.flush()
    try:
        proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                              check=False, **kwargs)
    except subprocess.TimeoutExpired as e:
        raise StepFailed(f"{step}: timed out after {timeout} s") from e
    if proc.returncode != 0:
        raise StepFailed(f"{step}: rc={proc.returncode}")


def capture(args, env, timeout=300):
    """(rc, stdout, stderr); TF logs to stderr, so results are read from stdout."""
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False, cwd=tempfile.gettempdir())
    return proc.returncode, proc.stdout, proc.stderr


def compilers_in(venv):
    """The compilers reachable from the venv's bin/ (there should be none)."""
    return [tool for tool in COMPILERS if shutil.which(tool, path=os.path.join(venv, "bin"))]


def no_compiler_env(venv):
    """Only the venv's bin/ on PATH, failing CXX/CC, no source-tree package or library
    (also used by tests/test_wheel.py)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "TF_CONV_BACKPROP_LIBRARY")}
    env.update(PATH=os.path.join(venv, "bin"), CXX="/bin/false", CC="/bin/false",
               PYTHONNOUSERSITE="1", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return env


def check_version(version, cuda, python, timeout):
    row = {"version": version, "keras": None, "build_s": None, "install_s": None,
           "check_s": None, "library": None, "result": "ok"}
    build_dir = os.path.join(ROOT, f"build-tf{version}")
    os.makedirs(build_dir, exist_ok=True)
    venv = tempfile.mkdtemp(prefix=f"tf-matrix-{version}-")
    with open(os.path.join(build_dir, "tf-matrix.log"), "w") as log:
        try:
            start = time.monotonic()
            run("build", ["make", "-C", ROOT, "wheel", f"TF_VERSION={version}", f"CUDA={cuda}",
                          f"PYTHON={python}"], log, timeout)
            row["build_s"] = round(time.monotonic() - start)
            wheels = glob.glob(os.path.join(ROOT, "dist", f"tf{version}", "tf_conv_backprop-*.whl"))
            if len(wheels) != 1:
                raise StepFailed(f"build: expected one wheel, found {wheels}")

            start = time.monotonic()
            run("install", [python, "-m", "venv", venv], log, timeout)
            vpy = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
            run("install", [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            f"tensorflow=={version}", wheels[0], "pytest"], log, timeout, env=env)
            row["install_s"] = round(time.monotonic() - start)

            start = time.monotonic()
            if compilers_in(venv):
                raise StepFailed(f"check: {compilers_in(venv)} reachable in {venv}/bin")
            env = dict(no_compiler_env(venv), TF_CONV_BACKPROP_TEST_INSTALLED="1")
            rc, out, _ = capture([vpy, "-c", "import keras; print(keras.__version__)"], env)
            row["keras"] = out.strip().splitlines()[-1] if rc == 0 and out.strip() else "?"
            run("check_install", [vpy, os.path.join(ROOT, "build_tools", "check_install.py")],
                log, timeout, env=env, cwd=tempfile.gettempdir())
            run("tests", [vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *[os.path.join(ROOT, t) for t in TESTS]], log, timeout, env=env,
                cwd=ROOT)
            rc, out, err = capture([vpy, "-m", "tf_conv_backprop", "info"], env)
            log.write(out + err)
            site = os.path.join(venv, "lib")
            if rc != 0 or "match: the library was built for this TensorFlow" not in out:
                raise StepFailed("info: no match between the build info and the running TF")
            if site not in out:
                raise StepFailed("info: the package did not load from the fresh venv")
            rc, out, err = capture([vpy, "-c", "import json; from tf_conv_backprop import _loader; "
                                               "print(json.dumps(_loader.build_info()))"], env)
            if rc != 0 or not out.strip():
                raise StepFailed(f"build info: rc={rc} {err[-500:]}")
            info = json.loads(out.strip().splitlines()[-1])
            row["library"] = (f"CPU + CUDA {info.get('cuda_version')}" if info.get("cuda_kernels")
                              else "CPU")
            row["check_s"] = round(time.monotonic() - start)
        except StepFailed as e:
            row["result"] = f"FAILED {e} (log: {os.path.relpath(log.name, ROOT)})"
        finally:
            shutil.rmtree(venv, ignore_errors=True)
    return row


def table(rows):
    head = ("TensorFlow", "Keras", "library", "build s", "install s", "check s", "result")
    lines = [head] + [(r["version"], r["keras"] or "-", r["library"] or "-", str(r["build_s"] or "-"),
                       str(r["install_s"] or "-"), str(r["check_s"] or "-"), r["result"])
                      for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) + "  " + line[-1]
                     for line in lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--cuda", default="0", choices=("0", "auto", "1"),
                        help="CUDA mode of each build (default 0: the CPU library; the GPU "
                             "kernels do not depend on the TF version)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venvs")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per step")
    parser.add_argument("--json", default=os.path.join(ROOT, "dist", "tf_matrix.json"))
    args = parser.parse_args(argv[1:])
    unknown = sorted(set(args.versions) - set(VERSIONS))
    if unknown:
        parser.error(f"unsupported TensorFlow {unknown}; supported: {' '.join(VERSIONS)}")
    rows = []
    for version in args.versions:
        print(f"tf-matrix: TensorFlow {version} ...", flush=True)
        rows.append(check_version(version, args.cuda, args.python, args.timeout))
        print(f"tf-matrix: TensorFlow {version}: {rows[-1]['result']}", flush=True)
    print("\n" + table(rows))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    return 0 if all(r["result"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
