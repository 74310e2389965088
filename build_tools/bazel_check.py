"""`make bazel-check`: build the op library with Bazel (BUILD.bazel, WORKSPACE) against
a pip-installed TensorFlow, then use it from TensorFlow.

    python build_tools/bazel_check.py --python .venv/bin/python [--output-root DIR]
                                      [--bazel bazel] [--online]

1. `bazel build //:_conv_backprop_ops.so //:build_info` with TF_PYTHON=<python>.
   Unless --online: the offline stand-ins for @rules_cc / @rules_java
   (build_tools/bazel/offline/README.md says why Bazel 4 needs them here).
2. build_tools/check_install.py in <python>, with TF_CONV_BACKPROP_LIBRARY pointing
   at Bazel's library: all fourteen public names against TF's built-ins.
3. `python -m tf_conv_backprop info` on that library (build info, kernels); and
   tests/core/check_isa_isolation.py on it, as on the Makefile's library.

Exits 0 when all three pass; 2 when no bazel is installed; 1 otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFLINE = os.path.join(ROOT, "build_tools", "bazel", "offline")
TARGETS = ["//:_conv_backprop_ops.so", "//:build_info"]


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False, **kwargs)


def run_filtered(cmd, **kwargs):
    """Runs cmd, passing its output through without the linux-sandbox debug lines
    Debian's Bazel prints for every action; returns the exit status."""
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **kwargs)
    hidden = 0
    for line in proc.stdout:
        if "linux-sandbox" in line:
            hidden += 1
        else:
            print(line, end="", flush=True)
    if hidden:
        print(f"({hidden} linux-sandbox debug lines not shown)")
    return proc.wait()


def check_isa_isolation(library, bin_dir):
    """tests/core/check_isa_isolation.py on Bazel's library and per-ISA objects, when
    this checkout has it: the variants must stay apart as in the Makefile build."""
    script = os.path.join(ROOT, "tests", "core", "check_isa_isolation.py")
    objects = sorted(f for f in os.listdir(bin_dir) if re.fullmatch(r"kernels_\w+\.pic\.o", f))
    if not os.path.exists(script) or not objects:
        return True
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for obj in objects:  # the script tells the ISA from the name kernels_<isa>.o
            names.append(os.path.join(tmp, obj.replace(".pic.o", ".o")))
            os.symlink(os.path.join(bin_dir, obj), names[-1])
        return run([sys.executable, script, library] + names).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter with TensorFlow")
    parser.add_argument("--output-root", default=None, help="Bazel --output_user_root")
    parser.add_argument("--bazel", default="bazel")
    parser.add_argument("--online", action="store_true",
                        help="let Bazel fetch rules_cc/rules_java instead of the stand-ins")
    args = parser.parse_args()

    bazel = shutil.which(args.bazel)
    if not bazel:
        print(f"bazel-check: `{args.bazel}` not found. On Debian/Ubuntu: "
              "apt-get install bazel-bootstrap", file=sys.stderr)
        return 2
    python = os.path.abspath(args.python)
    startup = [bazel] + ([f"--output_user_root={args.output_root}"] if args.output_root else [])
    options = [f"--repo_env=TF_PYTHON={python}", "--symlink_prefix=/"]
    if not args.online:
        options += [f"--override_repository=rules_cc={OFFLINE}/rules_cc",
                    f"--override_repository=rules_java={OFFLINE}/rules_java"]
    version = run(startup + ["--version"], capture_output=True, text=True, cwd=ROOT)
    print(f"bazel-check: {bazel}: {version.stdout.strip() or version.stderr.strip()}")
    try:
        built = run_filtered(startup + ["build"] + options + TARGETS, cwd=ROOT)
        if built != 0:
            print(f"bazel-check: FAILED: bazel build exited with {built} (its error is "
                  "above)", file=sys.stderr)
            return 1
        bin_dir = run(startup + ["info"] + options + ["bazel-bin"], capture_output=True,
                      text=True, cwd=ROOT).stdout.strip()
    finally:
        run(startup + ["shutdown"], cwd=ROOT)
    library = os.path.join(bin_dir, "_conv_backprop_ops.so")
    if not os.path.exists(library) or not os.path.exists(
            os.path.join(bin_dir, "_build_info.json")):
        print(f"bazel-check: FAILED: no library / build info in {bin_dir!r}", file=sys.stderr)
        return 1
    print(f"bazel-check: built {library} ({os.path.getsize(library)} bytes)")
    if not check_isa_isolation(library, bin_dir):
        print("bazel-check: FAILED: the CPU instruction-set variants are not isolated",
              file=sys.stderr)
        return 1

    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               TF_CONV_BACKPROP_LIBRARY=library, TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as outside:  # not the source tree
        for cmd in ([python, os.path.join(ROOT, "build_tools", "check_install.py")],
                    [python, "-m", "tf_conv_backprop", "info"]):
            if run(cmd, cwd=outside, env=env).returncode != 0:
                print(f"bazel-check: FAILED: {' '.join(cmd)}", file=sys.stderr)
                return 1
    print("bazel-check: OK: Bazel built the library against the pip-installed TensorFlow "
          "and it passed check_install.py and `info` in TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
