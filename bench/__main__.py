"""Run one benchmark: ``python -m bench NAME [args...]``.

Each benchmark is a module ``bench.<NAME>`` with a ``main(argv) -> dict`` function. It measures
our implementation against a baseline in the same run (the machines are shared and noisy, so only
ratios are comparable) and the dispatcher prints the returned figures as one JSON object on the
last line.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys

import bench


def _available() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_") and m.name != "timing"
    )


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    names = _available()
    if not args or args[0] in {"-h", "--help"}:
        sys.stdout.write("usage: python -m bench NAME [args]\nbenchmarks: " + ", ".join(names) + "\n")
        return 0 if args else 2
    name = args[0]
    if name not in names:
        sys.stderr.write(f"unknown benchmark {name!r}; choose one of: {', '.join(names)}\n")
        return 2
    module = importlib.import_module(f"bench.{name}")
    figures = module.main(args[1:])
    sys.stdout.write(json.dumps(figures, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
