"""An example benchmark loader (docs/adding.md): every non-empty line of a text file is one prompt, its id
the line number."""

from goose.benchmarks.prompts import Prompt, read_text_file
from goose.errors import GooseError


def load(spec, data) -> list[Prompt]:
    if not spec.path:
        raise GooseError("benchmark=lines needs benchmark.path=FILE (a text file, one prompt per line).")
    lines = read_text_file(spec.path, "benchmark file").split("\n")
    return [Prompt(str(n), line) for n, line in enumerate(lines, 1) if line.strip()]
