"""Prints a list of build_tools/sources.bzl for the Makefile (Starlark lists and dicts are
Python literals).

  python3 build_tools/sources.py CORE_SRCS         -> the paths, space-separated
  python3 build_tools/sources.py ISA_LEVELS         -> the level names, lowest first
  python3 build_tools/sources.py ISA_LEVELS avx2    -> that level's flags
"""
import ast
import os
import sys

SOURCES_BZL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sources.bzl")


def lists(path=SOURCES_BZL):
    """{name: value} of the file's top-level assignments."""
    tree = ast.parse(open(path).read(), path)
    return {node.targets[0].id: ast.literal_eval(node.value)
            for node in tree.body if isinstance(node, ast.Assign)}


def main(argv):
    value = lists()[argv[0]]
    if len(argv) > 1:
        value = value[argv[1]]
    print(" ".join(value))


if __name__ == "__main__":
    main(sys.argv[1:])
