"""The README's "Training" examples: each ```python block in that section starts with
`# <name>.py`. test_readme.py runs the single-process ones; test_distribute.py runs
mirrored.py and worker.py inside its own distributed processes (see cnn.py)."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("training.py", "save.py", "load.py", "mirrored.py", "worker.py", "patching.py")


def _section(text, title):
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def training_examples():
    """{file name: code} of the README's Training section."""
    with open(os.path.join(ROOT, "README.md")) as f:
        section = _section(f.read(), "Training")
    examples = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        first = block.splitlines()[0]
        match = re.match(r"# (\w+\.py)\b", first)
        if not match:
            raise ValueError(f"a README Training example does not start with '# <name>.py': "
                             f"{first}")
        examples[match.group(1)] = block
    return examples


def write_examples(directory, replace=()):
    """Writes the examples into directory; returns {name: path}."""
    paths = {}
    for name, code in training_examples().items():
        for old, new in replace:
            code = code.replace(old, new)
        paths[name] = os.path.join(str(directory), name)
        with open(paths[name], "w") as f:
            f.write(code)
    return paths
