"""The CUDA toolchain for the GPU kernels, from package registries only: Debian's clang-19
as the CUDA compiler, ptxas + libdevice from `nvidia-cuda-nvcc-cu12==12.5.82`, the
CUDA 12.5 headers that ship inside TensorFlow, and CUDA 13's `fatbinary` behind a shim
(clang 19 speaks `--image=`, fatbinary 13 only `--image3=`). No cudart is linked: TF's
libtensorflow_framework.so.2 exports it.

    python build_tools/cuda_toolchain.py ensure --mode auto|1|0 --build-dir build --tools-dir .cuda-toolchain
    python build_tools/cuda_toolchain.py install [--tools-dir .cuda-toolchain]
    python build_tools/cuda_toolchain.py status [...]

`ensure` (run by `make build` with the TensorFlow interpreter) decides whether the
library gets CUDA kernels and writes BUILD/cuda_mode ("1" or "0", rewritten only when
it changes, so the library relinks exactly when the mode changes) and, for "1",
BUILD/cuda_version and a fake CUDA install BUILD/cuda-root for clang:
  * mode 0: CPU-only.
  * mode 1: the toolchain is installed if missing; failure is an error (CI).
  * mode auto: as 1, but a failed install only prints why and builds CPU-only; the
    failure is remembered in BUILD/cuda_toolchain.failed so later builds don't retry
    (`make gpu-toolchain` or `make clean` does).
`install` installs what is missing: `apt-get install -y clang-19` (as root; after
`apt-get update`) and the pip packages into TOOLS_DIR (`pip install --target`).
"""
import argparse
import os
import shutil
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CLANG = "clang++-19"
PTXAS_PACKAGE = "nvidia-cuda-nvcc-cu12==12.5.82"
FATBINARY_PACKAGE = "nvidia-cuda-nvcc==13.0.88"

FATBINARY_SHIM = r"""#!/bin/sh
# clang 19 passes --image=profile=sm_XX,file=F; CUDA 13's fatbinary wants --image3=.
REAL='@FATBINARY@'
set -- "$@" --end--
while [ "$1" != "--end--" ]; do
  a="$1"; shift
  case "$a" in
    --image=profile=sm_*,file=*)      s=${a#--image=profile=sm_};      set -- "$@" "--image3=kind=elf,sm=${s%%,file=*},file=${s#*,file=}" ;;
    --image=profile=compute_*,file=*) s=${a#--image=profile=compute_}; set -- "$@" "--image3=kind=ptx,sm=${s%%,file=*},file=${s#*,file=}" ;;
    *) set -- "$@" "$a" ;;
  esac
done
shift
exec "$REAL" --compress=false "$@"
"""


def log(msg):
    print(f"cuda_toolchain: {msg}", flush=True)


def tf_cuda_dir():
    """TF's bundled CUDA headers (third_party/gpus/cuda), or None."""
    try:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    path = os.path.join(tf.sysconfig.get_include(), "third_party", "gpus", "cuda")
    return path if os.path.isfile(os.path.join(path, "include", "cuda.h")) else None


def cuda_version(cuda_dir):
    """"12.5" from CUDA_VERSION 12050 in cuda.h."""
    with open(os.path.join(cuda_dir, "include", "cuda.h")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[:2] == ["#define", "CUDA_VERSION"]:
                v = int(parts[2])
                return f"{v // 1000}.{(v % 1000) // 10}"
    return None


def find_clang():
    path = shutil.which(CLANG)
    if not path:
        return None
    try:
        subprocess.run([path, "--version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return path


def find_ptxas(tools_dir):
    path = os.path.join(tools_dir, "cu12", "nvidia", "cuda_nvcc", "bin", "ptxas")
    libdevice = os.path.join(tools_dir, "cu12", "nvidia", "cuda_nvcc", "nvvm", "libdevice")
    return (path, libdevice) if os.access(path, os.X_OK) and os.path.isdir(libdevice) else (None, None)


def find_fatbinary(tools_dir):
    """CUDA 13's fatbinary: the system CUDA 13 toolkit's, else the pip copy."""
    candidates = [os.path.join(os.environ[var], "bin", "fatbinary")
                  for var in ("CUDA13_HOME", "CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]
    candidates += ["/usr/local/cuda/bin/fatbinary", shutil.which("fatbinary") or "",
                   os.path.join(tools_dir, "cu13", "nvidia", "cu13", "bin", "fatbinary")]
    for path in candidates:
        if path and os.access(path, os.X_OK) and fatbinary_is_13(path):
            return path
    return None


def fatbinary_is_13(path):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "release 13." in out or "cuda_13." in out


def missing(tools_dir, cuda_dir):
    why = []
    if not cuda_dir:
        why.append("TensorFlow's bundled CUDA headers (third_party/gpus/cuda) not found")
    if not find_clang():
        why.append(f"{CLANG} not found (Debian: apt-get install -y clang-19)")
    if not find_ptxas(tools_dir)[0]:
        why.append(f"ptxas 12.5 not in {tools_dir}/cu12 (pip install --target {tools_dir}/cu12 {PTXAS_PACKAGE})")
    if not find_fatbinary(tools_dir):
        why.append(f"CUDA 13 fatbinary not found (pip install --no-deps --target {tools_dir}/cu13 {FATBINARY_PACKAGE})")
    return why


def run(cmd):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=False).returncode == 0


def install(tools_dir):
    """Installs what is missing; True when everything is there afterwards."""
    ok = True
    if not find_clang():
        if os.geteuid() != 0:
            log("not root: cannot apt-get install clang-19 (run: sudo apt-get install -y clang-19)")
            ok = False
        elif shutil.which("apt-get") is None:
            log("no apt-get: install clang 19 (clang++-19) by other means")
            ok = False
        else:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "clang-19"]):
                log("$ " + " ".join(cmd))
                if subprocess.run(cmd, env=env, check=False).returncode != 0:
                    ok = False
                    break
    # One --target folder per package: both install into nvidia/, which pip would replace.
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade", "--target"]
    if not find_ptxas(tools_dir)[0]:
        ok = run(pip + [os.path.join(tools_dir, "cu12"), PTXAS_PACKAGE]) and ok
    if not find_fatbinary(tools_dir):
        ok = run(pip + [os.path.join(tools_dir, "cu13"), "--no-deps", FATBINARY_PACKAGE]) and ok
    return ok and bool(find_clang()) and bool(find_ptxas(tools_dir)[0]) and bool(find_fatbinary(tools_dir))


def symlink(target, link):
    if os.path.islink(link) or os.path.exists(link):
        if os.path.islink(link) and os.readlink(link) == target:
            return
        os.remove(link)
    os.symlink(target, link)


def make_cuda_root(root, cuda_dir, tools_dir):
    """A CUDA install as clang's --cuda-path sees it: TF's 12.5 headers, pip ptxas
    12.5 + libdevice, the fatbinary shim."""
    ptxas, libdevice = find_ptxas(tools_dir)
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    os.makedirs(os.path.join(root, "nvvm"), exist_ok=True)
    symlink(os.path.join(cuda_dir, "include"), os.path.join(root, "include"))
    symlink(os.path.join(cuda_dir, "libcudacxx"), os.path.join(root, "libcudacxx"))
    symlink(os.path.abspath(ptxas), os.path.join(root, "bin", "ptxas"))
    symlink(os.path.abspath(libdevice), os.path.join(root, "nvvm", "libdevice"))
    shim = os.path.join(root, "bin", "fatbinary")
    text = FATBINARY_SHIM.replace("@FATBINARY@", find_fatbinary(tools_dir))
    if not os.path.exists(shim) or open(shim).read() != text:
        with open(shim, "w") as f:
            f.write(text)
        os.chmod(shim, 0o755)
    # clang reads the CUDA version from version.json / version.txt when present;
    # cuda.h is enough (it reports 12.5, "partially supported", silenced by a flag).


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def ensure(args):
    os.makedirs(args.build_dir, exist_ok=True)
    mode_file = os.path.join(args.build_dir, "cuda_mode")
    failed_file = os.path.join(args.build_dir, "cuda_toolchain.failed")
    if args.mode == "0":
        write_if_changed(mode_file, "0\n")
        log("CUDA=0: building the CPU-only library")
        return 0
    cuda_dir = tf_cuda_dir()
    why = missing(args.tools_dir, cuda_dir)
    if why and cuda_dir and (args.mode == "1" or not os.path.exists(failed_file)):
        log("installing the CUDA toolchain: " + "; ".join(why))
        install(args.tools_dir)
        why = missing(args.tools_dir, cuda_dir)
    if why:
        if args.mode == "1":
            log("CUDA=1 but the toolchain is not available: " + "; ".join(why))
            return 1
        with open(failed_file, "w") as f:
            f.write("\n".join(why) + "\n")
        write_if_changed(mode_file, "0\n")
        log("building the CPU-only library (no CUDA toolchain: " + "; ".join(why) +
            "; `make gpu-toolchain` retries the install)")
        return 0
    if os.path.exists(failed_file):
        os.remove(failed_file)
    root = os.path.join(args.build_dir, "cuda-root")
    make_cuda_root(root, cuda_dir, args.tools_dir)
    version = cuda_version(cuda_dir)
    write_if_changed(os.path.join(args.build_dir, "cuda_version"), f"{version}\n")
    write_if_changed(mode_file, "1\n")
    log(f"building the library with CUDA kernels (clang-19, CUDA {version} headers from TensorFlow, "
        f"ptxas {PTXAS_PACKAGE.split('==')[1]})")
    return 0


def status(args):
    cuda_dir = tf_cuda_dir()
    why = missing(args.tools_dir, cuda_dir)
    print(f"TF CUDA headers: {cuda_dir} (CUDA {cuda_version(cuda_dir) if cuda_dir else None})")
    print(f"clang: {find_clang()}")
    print(f"ptxas: {find_ptxas(args.tools_dir)[0]}")
    print(f"fatbinary: {find_fatbinary(args.tools_dir)}")
    print("ready" if not why else "missing: " + "; ".join(why))
    return 0 if not why else 1


def main(argv):
    global CLANG  # pylint: disable=global-statement
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["ensure", "install", "status"])
    parser.add_argument("--mode", default="auto", choices=["auto", "1", "0"])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--tools-dir", default=".cuda-toolchain")
    parser.add_argument("--clang", default=CLANG, help="the CUDA compiler (clang++-19)")
    args = parser.parse_args(argv[1:])
    CLANG = args.clang
    args.tools_dir = os.path.abspath(args.tools_dir)
    if args.what == "ensure":
        try:
            return ensure(args)
        except Exception as e:  # pylint: disable=broad-except
            if args.mode == "1":
                raise
            # auto: never break `make build` over the optional GPU part.
            os.makedirs(args.build_dir, exist_ok=True)
            write_if_changed(os.path.join(args.build_dir, "cuda_mode"), "0\n")
            log(f"building the CPU-only library (CUDA toolchain check failed: {e!r})")
            return 0
    if args.what == "install":
        ok = install(args.tools_dir)
        log("toolchain ready" if ok else "toolchain incomplete")
        failed_file = os.path.join(args.build_dir, "cuda_toolchain.failed")
        if ok and os.path.exists(failed_file):
            os.remove(failed_file)
        return 0 if ok else 1
    return status(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
