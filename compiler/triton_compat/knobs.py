"""`triton.knobs`: a minimal look-alike of Triton's settings object.

Anvil's own settings are environment variables (compiler/knobs.py); these attributes exist so
code that reads or scopes Triton's knobs keeps working. `knobs.cache.dir` maps to the Anvil
compile cache directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..knobs import cache_dir

__all__ = ["cache", "runtime", "compilation", "language", "autotuning", "build", "nvidia", "amd", "base_knobs",
           "propagate_env"]

propagate_env = True


class base_knobs:  # noqa: N801 - Triton's name
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)
        self._defaults = dict(values)

    @contextlib.contextmanager
    def scope(self) -> Iterator[base_knobs]:
        saved = {k: v for k, v in self.__dict__.items() if k != "_defaults"}
        try:
            yield self
        finally:
            self.__dict__.update(saved)

    def copy(self) -> base_knobs:
        return type(self)(**self._defaults)

    def reset(self) -> base_knobs:
        self.__dict__.update(self._defaults)
        return self

    @property
    def knob_descriptors(self) -> dict[str, Any]:
        return {}


class _CacheKnobs(base_knobs):
    @property
    def dir(self) -> str:
        return str(cache_dir())

    @dir.setter
    def dir(self, value: str) -> None:
        os.environ["ANVIL_CACHE_DIR"] = str(value)

    @contextlib.contextmanager
    def scope(self) -> Iterator[base_knobs]:
        old = os.environ.get("ANVIL_CACHE_DIR")
        try:
            yield self
        finally:
            if old is None:
                os.environ.pop("ANVIL_CACHE_DIR", None)
            else:
                os.environ["ANVIL_CACHE_DIR"] = old


cache = _CacheKnobs(dump_dir="", override_dir="", home_dir="")
runtime = base_knobs(interpret=False, debug=False, override_arch=None, launch_enter_hook=None,
                     launch_exit_hook=None, add_stages_inspection_hook=None, jit_cache_hook=None,
                     jit_post_compile_hook=None)
compilation = base_knobs(always_compile=False, dump_ir=False, disable_line_info=False, front_end_debugging=False,
                         allow_non_constexpr_globals=False, listener=None)
language = base_knobs(fp32_default=None, default_fp_fusion=True)
autotuning = base_knobs(cache=False, print=False)
build = base_knobs(cc=None)
nvidia = base_knobs()
amd = base_knobs()
