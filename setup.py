"""Build step of ``pip install``: compiles the hot modules with mypyc (list: kube/compiled.py).

Everything else is in pyproject.toml. Compilation is best effort: with ``DRA_PURE_PYTHON=1``, without
mypyc, or when mypyc or the C compiler fails, the project installs as plain Python (same behaviour,
more CPU per request) and says so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from kube.compiled import COMPILED_MODULES, PURE_ENV, record_built_sources, source_digests, source_path  # noqa: E402


def extensions() -> list:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        print(f"{PURE_ENV} is set: installing without compiled modules", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("mypyc is not available: installing without compiled modules", file=sys.stderr)
        return []
    try:
        # multi_file: one C file per module, so the C compiler runs on every core (build_ext's parallel).
        exts = mypycify([str(source_path(m).relative_to(ROOT)) for m in COMPILED_MODULES], opt_level="3", debug_level="0", multi_file=True)
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by exiting
        print(f"mypyc failed ({exc!r}): installing without compiled modules", file=sys.stderr)
        return []
    for ext in exts:
        # A C compiler failure leaves the pure-Python modules in place instead of failing the install.
        ext.optional = True
    return exts


class MypycBuildExt(build_ext):
    """Runs mypyc when the extensions are built, not each time pip asks setup.py for metadata."""

    def run(self) -> None:
        digests = source_digests(ROOT)  # the texts mypyc is about to read
        self.extensions = self.distribution.ext_modules = extensions()
        # What setuptools' finalize_options notes on each extension, for these ones made later.
        for ext in self.extensions:
            ext._full_name = self.get_ext_fullname(ext.name)
            self.ext_map[ext._full_name] = ext
            ext._links_to_dynamic = ext._needs_stub = False
            ext._file_name = self.get_ext_filename(ext._full_name)
        self.failed: list[str] = []
        super().run()
        if self.extensions and not self.failed:
            record_built_sources(digests, ROOT)

    def build_extension(self, ext: Extension) -> None:
        # An optional extension that fails to build is skipped with a warning; its old build then
        # must not be recorded as matching the new source.
        try:
            super().build_extension(ext)
        except Exception:
            self.failed.append(ext.name)
            raise


# A placeholder, so that setuptools plans a build_ext step (which replaces it by mypyc's extensions).
# An editable install (the Makefile's) builds them in place, next to their sources.
setup(
    ext_modules=[Extension("kube._mypyc_placeholder", sources=[])],
    cmdclass={"build_ext": MypycBuildExt},
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
