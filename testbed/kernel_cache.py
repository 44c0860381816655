"""Is numba's on-disk cache of Referee's compiled kernels warm?

Every numeric kernel is a numba function with ``cache=True``: the first start after installing
compiles them (a minute on a small machine; import-time warm-ups and the first map geometry do
most of it) and writes them to numba's cache, later starts load them in a few seconds. The CLI
asks :func:`cold_modules` before its first compile-heavy step so that it can say why a cold
start is silent for so long.

The answer is read from numba's own cache files, without compiling or importing a kernel
module: for each kernel module, the folder numba caches it in (chosen as numba's cache locators
choose it: ``NUMBA_CACHE_DIR``, else the writable ``__pycache__`` beside the source, else the
user-wide cache) must hold an index file (``<module>.<function>-<line>.py311.nbi``) written by
the installed numba version for the current source text (numba stores the source's SHA-256 in
the index and ignores an index whose hash differs) that lists at least one compiled overload.
A module counts as cached when one of its index files passes; a module that no run has compiled
yet, an edited source, or another numba version make it cold.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import pickle
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "COMMAND_KERNEL_MODULES",
    "KERNEL_MODULES",
    "cold_modules",
    "has_fresh_index",
    "kernel_cache_dir",
    "module_source",
]

log = logging.getLogger(__name__)

KERNEL_MODULES: tuple[str, ...] = (
    "anticheat.detectors.aimdetect.features",
    "anticheat.detectors.aimdetect.model",
    "anticheat.detectors.aimdetect.trajectory",
    "anticheat.detectors.aimstats",
    "bots.nav",
    "bots.world_model",
    "lagcomp.history",
    "lagcomp.hitreg",
    "lagcomp.rewind_policy",
    "physics.movement_kernel",
    "physics.validation",
    "physics.weapon_state",
    "server.entity_block",
    "server.input_kernel",
    "server.phantom_kernel",
    "server.protocol.commands",
    "server.snapshot_kernel",
    "server.visibility",
    "testbed.link",
    "world.ray_kernel",
    "world.sweep_kernel",
)
"""Every module holding ``cache=True`` kernels (a test keeps this list equal to the sources)."""

_BOT_KERNEL_MODULES: tuple[str, ...] = (
    "bots.nav",
    "bots.world_model",
    "lagcomp.history",
    "lagcomp.hitreg",
    "lagcomp.rewind_policy",
    "physics.movement_kernel",
    "physics.weapon_state",
    "server.entity_block",
    "server.protocol.commands",
    "testbed.link",
    "world.ray_kernel",
    "world.sweep_kernel",
)

COMMAND_KERNEL_MODULES: Mapping[str, tuple[str, ...]] = {
    "match": KERNEL_MODULES,
    "serve": tuple(m for m in KERNEL_MODULES if m not in ("bots.nav", "bots.world_model")),
    "bots": _BOT_KERNEL_MODULES,
}
"""The kernel modules each command compiles on a cold start (measured with an empty
``NUMBA_CACHE_DIR``): a server compiles no bot kernels and bots compile no server-only or
detector kernels, so a command is not called cold for kernels that it never compiles."""


def module_source(name: str) -> Path | None:
    """The source file of module ``name`` (dotted), found without importing it; None if absent.

    Only the top-level package is located through the import system (which does not import it);
    the module's file is then looked up under the package's folder.
    """
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder, *rest.split(".")).with_suffix(".py") if rest else Path(folder, "__init__.py")
        if path.is_file():
            return path
    return None


def _cache_subpath(source: Path) -> str:
    """numba's folder name for ``source`` inside a cache root (``_CacheLocator.get_suitable_cache_subpath``)."""
    folder = os.path.dirname(os.path.abspath(source))
    return "_".join([os.path.split(folder)[-1], hashlib.sha1(folder.encode()).hexdigest()])


def _writable_dir(path: Path) -> bool:
    """Whether numba could use ``path`` as a cache folder (it exists and is writable, or it can
    be created), tested without creating anything."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def kernel_cache_dir(source: Path) -> Path:
    """The folder numba caches the kernels of ``source`` in: ``NUMBA_CACHE_DIR`` when set, else
    the ``__pycache__`` beside the source when writable, else numba's user-wide cache folder
    (the order of numba's cache locators)."""
    from numba.core import config

    if config.CACHE_DIR:
        return Path(config.CACHE_DIR) / _cache_subpath(source)
    in_tree = source.parent / "__pycache__"
    if _writable_dir(in_tree):
        return in_tree
    from numba.misc.appdirs import AppDirs

    return Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / _cache_subpath(source)


def _index_is_fresh(index: Path, numba_version: str, source_hash: bytes) -> bool:
    """One numba index file: written by ``numba_version`` for a source hashing to
    ``source_hash``, listing at least one compiled overload (numba's ``IndexDataCacheFile``)."""
    try:
        with index.open("rb") as f:
            if pickle.load(f) != numba_version:
                return False
            stamp, overloads = pickle.loads(f.read())
    except Exception as exc:  # noqa: BLE001 - any unreadable index is simply not a cache hit
        log.debug("%s: unreadable numba index: %s", index, exc)
        return False
    return stamp == source_hash and bool(overloads)


def has_fresh_index(source: Path, cache_dir: Path | None = None) -> bool:
    """Whether numba's cache holds kernels of ``source`` compiled from its current text by the
    installed numba version (see the module docstring). ``cache_dir``: where to look (default:
    :func:`kernel_cache_dir`)."""
    import numba

    folder = cache_dir if cache_dir is not None else kernel_cache_dir(source)
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    try:
        indexes = sorted(folder.glob(f"{source.stem}.*-*.{tag}.nbi"))
        source_hash = hashlib.sha256(source.read_bytes()).digest() if indexes else b""
    except OSError:
        return False
    return any(_index_is_fresh(index, numba.__version__, source_hash) for index in indexes)


def cold_modules(modules: Iterable[str] = KERNEL_MODULES) -> list[str]:
    """The kernel modules among ``modules`` that numba would compile rather than load from its
    cache (an empty list when every one is cached, or when numba's JIT is disabled). A module
    whose source cannot be found is skipped."""
    from numba.core import config

    if config.DISABLE_JIT:
        return []
    cold = []
    for name in modules:
        source = module_source(name)
        if source is None:
            log.debug("kernel module %s not found", name)
            continue
        if not has_fresh_index(source):
            cold.append(name)
    return cold
