"""The PEP 517 backend of an isolated `pip install .`: setuptools' own, plus the
TensorFlow to build against in the isolated environment, TF_CONV_BACKPROP_TF_VERSION
(default below). pyproject.toml cannot read a variable, so the requirement is computed
here. Without isolation pip does not ask, and the environment's TF is used.
"""
import os

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  pylint: disable=wildcard-import

from tf_matrix import VERSIONS

DEFAULT_TF_VERSION = VERSIONS[-1]


def _tensorflow():
    version = os.environ.get("TF_CONV_BACKPROP_TF_VERSION", "").strip() or DEFAULT_TF_VERSION
    return [f"tensorflow=={version}"]


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _tensorflow()


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + _tensorflow()
