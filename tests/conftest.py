import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_HERE = os.path.dirname(os.path.abspath(__file__))
# The package from the source tree (built in place by `make build`), unless
# TF_CONV_BACKPROP_TEST_INSTALLED=1 asks for the installed one (`make tf-matrix` runs
# some of these tests against each installed wheel); the test helpers (reference.py,
# cases.py) as top-level modules.
if os.environ.get("TF_CONV_BACKPROP_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
sys.path.insert(0, _HERE)
