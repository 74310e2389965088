"""The package's op table (python/tf_conv_backprop/_ops.py) for code that runs without
TensorFlow: importing it as `tf_conv_backprop._ops` would first run the package's
__init__, which imports TensorFlow and loads the op library. The bad-input table
(read by build_tools/gen_fuzz_corpus.py) and tests/core/gpu_check.py (a GPU machine
without TensorFlow) use it as `from op_table import ops`.
"""
import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python",
                     "tf_conv_backprop", "_ops.py")


def _load():
    # Once the package is imported, share its module: one set of OpSpec objects.
    if "tf_conv_backprop._ops" in sys.modules:
        return sys.modules["tf_conv_backprop._ops"]
    spec = importlib.util.spec_from_file_location("tf_conv_backprop_op_table", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


ops = _load()
