"""``testbed.kernel_cache``: telling a cold numba cache from a warm one without compiling."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import numba
import pytest

from testbed import kernel_cache as kc

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("world", "physics", "lagcomp", "anticheat", "server", "bots", "testbed")

KERNEL_SOURCE = '''
import numba


@numba.njit(cache=True)
def twice(x):
    return 2 * x
'''


def _has_cached_kernel(path: Path) -> bool:
    """Whether a source file decorates a function with ``...(cache=True)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(dec, ast.Call) and any(k.arg == "cache" and isinstance(k.value, ast.Constant) and k.value.value is True
                                          for k in dec.keywords)
        for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for dec in node.decorator_list
    )


def test_kernel_modules_are_the_modules_with_cached_kernels() -> None:
    found = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if _has_cached_kernel(path)
    }
    assert set(kc.KERNEL_MODULES) == found
    assert kc.COMMAND_KERNEL_MODULES["match"] == kc.KERNEL_MODULES
    for modules in kc.COMMAND_KERNEL_MODULES.values():
        assert set(modules) <= found
    for name in kc.KERNEL_MODULES:
        assert kc.module_source(name) == ROOT / Path(*name.split(".")).with_suffix(".py")
    assert "server.core" not in kc.COMMAND_KERNEL_MODULES["bots"] and "bots.nav" not in kc.COMMAND_KERNEL_MODULES["serve"]
    assert kc.module_source("world.no_such_module") is None and kc.module_source("no_such_package.x") is None


def _load(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cold_then_warm_then_stale_after_an_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel module of its own: cold before its first compile, warm after (numba wrote its index
    beside the source), cold again when its text changes, warm again once recompiled."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    source = tmp_path / "kern_cache_probe.py"
    source.write_text(KERNEL_SOURCE)
    assert kc.kernel_cache_dir(source) == tmp_path / "__pycache__"
    assert not kc.has_fresh_index(source)
    module = _load(source, "kern_cache_probe")
    assert module.twice(21) == 42  # type: ignore[attr-defined]
    assert list((tmp_path / "__pycache__").glob("kern_cache_probe.twice-*.nbi"))
    assert kc.has_fresh_index(source)

    source.write_text(KERNEL_SOURCE.replace("2 * x", "x + x + 0"))  # numba would not load the old code
    assert not kc.has_fresh_index(source)
    module = _load(source, "kern_cache_probe")
    assert module.twice(21) == 42  # type: ignore[attr-defined]
    assert kc.has_fresh_index(source)


def test_an_index_of_another_numba_version_or_unreadable_is_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    source = tmp_path / "kern_version_probe.py"
    source.write_text(KERNEL_SOURCE)
    _load(source, "kern_version_probe").twice(1)  # type: ignore[attr-defined]
    assert kc.has_fresh_index(source)
    monkeypatch.setattr(numba, "__version__", "0.0.0")
    assert not kc.has_fresh_index(source)
    monkeypatch.undo()
    (index,) = (tmp_path / "__pycache__").glob("kern_version_probe.*.nbi")
    index.write_bytes(b"not a pickle")
    assert not kc.has_fresh_index(source)


def test_cache_dir_follows_numba_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With NUMBA_CACHE_DIR set, numba caches under it (in a folder named for the source's folder);
    a warm __pycache__ beside the source then does not count."""
    from numba.core.caching import _CacheLocator

    source = kc.module_source("world.sweep_kernel")
    assert source is not None
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    expected = tmp_path / "cache" / _CacheLocator.get_suitable_cache_subpath(str(source))
    assert kc.kernel_cache_dir(source) == expected
    assert kc.cold_modules(["world.sweep_kernel", "world.no_such_module"]) == ["world.sweep_kernel"]


def test_cold_modules_over_the_real_kernel_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cold_modules over the real kernel modules, their caches looked up in a temporary folder: all
    cold when it is empty; a module counts as warm once a fresh index of it is there."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(kc, "kernel_cache_dir", lambda source: cache)
    modules = kc.COMMAND_KERNEL_MODULES["bots"]
    assert kc.cold_modules(modules) == list(modules)

    # A fresh index for world.sweep_kernel, written the way numba writes it (version, then the
    # source's hash and the overloads).
    import hashlib
    import pickle

    source = kc.module_source("world.sweep_kernel")
    assert source is not None
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    with (cache / f"sweep_kernel.sweep-1.{tag}.nbi").open("wb") as f:
        pickle.dump(numba.__version__, f)
        f.write(pickle.dumps((hashlib.sha256(source.read_bytes()).digest(), {("sig",): "sweep_kernel.sweep-1.py.1.nbc"})))
    assert kc.cold_modules(modules) == [m for m in modules if m != "world.sweep_kernel"]
    # An index listing nothing compiled (numba's flush) is not a cache hit.
    with (cache / f"sweep_kernel.sweep-1.{tag}.nbi").open("wb") as f:
        pickle.dump(numba.__version__, f)
        f.write(pickle.dumps((hashlib.sha256(source.read_bytes()).digest(), {})))
    assert "world.sweep_kernel" in kc.cold_modules(modules)


def test_disabled_jit_compiles_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    assert kc.cold_modules() == []

