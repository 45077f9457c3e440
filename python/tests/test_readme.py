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
