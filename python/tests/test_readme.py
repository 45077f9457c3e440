"""README.md's Python example runs as pasted and prints what its comment says
(the C++ example's twin is tests/readme.cmake)."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_example_runs_as_pasted():
    example = re.search(r"\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    printed = re.search(r"^print\(.*\)\s+# (.*)$", example, re.M).group(1)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(example, str(README), "exec"), {})
    assert output.getvalue() == printed + "\n"


def test_the_readme_first_command_builds_the_python_module():
    # README command 1 leaves build/python importable: it builds the command and the module's target.
    command = re.search(r"\n```sh\n(.*?)```", README.read_text(), re.S).group(1)
    targets = re.search(r"cmake --build --preset release --target ([^&]*)&&", command).group(1).split()
    cmake_lists = (README.parent / "python" / "CMakeLists.txt").read_text()
    module = re.search(r"pybind11_add_module\((\w+)", cmake_lists).group(1)
    assert "bitexact_cli" in targets and module in targets, f"README command 1 builds {targets}, not {module}"
