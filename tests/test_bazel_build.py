"""BUILD.bazel builds the same library as the Makefile: the same sources, the same
compiler flags for each, the same CPU instruction-set variants with the same -m flags.

The Makefile is the reference (it is what `make build`, the wheel and CI use); its
compile commands are read from a dry run (`make -n -B so` into an empty build folder,
which runs nothing), BUILD.bazel's lists from the file itself (Starlark is Python
syntax). Bazel itself is not needed here; `make bazel-check` builds with it.
"""
import ast
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bazel_lists():
    """BUILD.bazel's literal lists plus those it loads from build_tools/sources.bzl."""
    sys.path.insert(0, os.path.join(ROOT, "build_tools"))
    import sources
    found = dict(sources.lists())
    found["ISA_FLAGS"] = found["ISA_LEVELS"]
    tree = ast.parse(open(os.path.join(ROOT, "BUILD.bazel")).read(), "BUILD.bazel")
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            try:
                found[name] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


@pytest.fixture(scope="module")
def make_compiles(tmp_path_factory):
    """{(source, isa or None): set of flags} from the Makefile's compile commands."""
    build_dir = tmp_path_factory.mktemp("dry_build")
    out = subprocess.run(["make", "-n", "-B", "so", f"BUILD_DIR={build_dir}", "CXX=c++"],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=120).stdout
    compiles = {}
    # Recipe lines continued with a backslash are one command.
    for line in out.replace("\\\n", " ").splitlines():
        if not line.startswith("c++ "):
            continue
        words = shlex.split(line.replace("$(cat ", "CAT(").replace("$$(cat ", "CAT("))
        if "-c" not in words:
            continue
        source = words[words.index("-c") + 1]
        flags = [w for i, w in enumerate(words[1:], 1)
                 if not w.startswith("CAT(") and not w.endswith("tf_cflags)")
                 and w not in ("-c", "-o") and words[i - 1] not in ("-c", "-o")]
        isa = next((f.split("=", 1)[1] for f in flags if f.startswith("-DTCB_ISA=")), None)
        compiles[(source, isa)] = set(flags)
    assert compiles, f"no compile command in `make -n -B so`:\n{out[-3000:]}"
    return compiles


def test_same_sources(make_compiles):
    b = bazel_lists()
    make_plain = {src for src, isa in make_compiles if isa is None}
    make_isa = {src for src, isa in make_compiles if isa is not None}
    assert set(b["CORE_SRCS"]) | set(b["TF_SRCS"]) == make_plain, (
        "BUILD.bazel CORE_SRCS + TF_SRCS differ from the sources the Makefile compiles "
        "with the plain flags")
    assert set(b["ISA_SRCS"]) == make_isa, "BUILD.bazel ISA_SRCS differ from the Makefile's"


def test_same_isas(make_compiles):
    b = bazel_lists()
    assert set(b["ISA_FLAGS"]) == {isa for _, isa in make_compiles if isa is not None}


def test_same_flags(make_compiles):
    """Bazel adds -fPIC and the workspace root (-I.) itself; everything else matches."""
    b = bazel_lists()
    implicit = {"-fPIC", "-I."}
    for (source, isa), flags in sorted(make_compiles.items(), key=str):
        expected = set(b["COPTS"]) | implicit
        if isa is not None:
            expected |= set(b["ISA_COPTS"]) | set(b["ISA_FLAGS"][isa]) | {f"-DTCB_ISA={isa}"}
        assert flags == expected, (
            f"{source} ({isa or 'plain'}): Makefile has {sorted(flags - expected)} that "
            f"BUILD.bazel lacks, BUILD.bazel has {sorted(expected - flags)} that the "
            "Makefile lacks")


def test_localised_symbol_prefix_matches():
    """The objcopy --keep-global-symbol pattern (namespace cpu::<isa>) is the same."""
    makefile = open(os.path.join(ROOT, "mk", "library.mk")).read()
    isa_bzl = open(os.path.join(ROOT, "build_tools", "bazel", "isa.bzl")).read()
    assert "_ZN16tf_conv_backprop3cpu" in makefile and "-R .group" in makefile
    assert '"_ZN16tf_conv_backprop3cpu%d%s*" % (len(isa), isa)' in isa_bzl
    assert re.search(r'"-R", "\.group", "--wildcard", "--keep-global-symbol="', isa_bzl)


def test_both_link_libtensorflow_cc_and_xla_includes():
    """The XLA kernels need libtensorflow_cc and XLA's include roots in both builds."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "build_tools"))
    import tf_config
    assert "-l:" + tf_config.cc_library() in tf_config.link_flags()
    for d in tf_config.xla_include_dirs():
        assert os.path.isdir(d), d
    bzl = open(os.path.join(ROOT, "build_tools", "bazel", "tf_configure.bzl")).read()
    assert 'conf["xla_includes"]' in bzl and 'name = "libtensorflow_cc"' in bzl
    assert "@local_config_tf//:libtensorflow_cc" in open(os.path.join(ROOT, "BUILD.bazel")).read()
