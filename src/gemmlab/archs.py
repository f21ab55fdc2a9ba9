"""Which targets gemmlab builds for: an --arch checked against what this NVRTC knows, and kernels
of which none builds for the arch named (compile's refusals, before any compiling)."""
from __future__ import annotations

import re

from .errors import BadArgumentError


def refuse_if_none_builds(kernels: list, arch: str) -> None:
    """Kernels of which none builds for `arch` (a wgmma rung named for sm_80): one line and exit 2,
    as analyze says it, not a table of skips and exit 0 with nothing built."""
    skips = []
    for spec in kernels:
        try:
            spec.arch_for(arch)
            return
        except BadArgumentError:
            skips.append(f"{spec.name}: not built for {arch} (needs {spec.arch})")
    raise BadArgumentError("; ".join(skips))


MIN_ARCH = 75  # the oldest NVRTC target that builds the first rungs (cp.async ones need sm_80: they say so)
SUFFIX_FROM = {"a": 90, "f": 100}  # arch-specific (wgmma, setmaxnreg) and family-specific targets


def check_arch(arch: str, what: str) -> None:
    """One line unless NVRTC can be asked to build for `arch`: sm_NN from sm_75 on that this NVRTC
    knows, sm_NNa from sm_90 and sm_NNf from sm_100. Without NVRTC, only the form is checked
    (compiling then says what is missing); a kernel the arch cannot run fails in its own row."""
    from .envinfo import nvrtc_archs

    known = [a for a in nvrtc_archs() if a >= MIN_ARCH]
    form = re.fullmatch(r"sm_([1-9][0-9]*)([af]?)", arch)  # ASCII digits, as NVRTC reads them
    number = int(form[1]) if form else 0
    if number < (SUFFIX_FROM[form[2]] if form and form[2] else MIN_ARCH) or (known and number not in known):
        listed = ", ".join(f"sm_{a}" for a in known) or f"sm_{MIN_ARCH} and up"
        raise BadArgumentError(f"{what} {'is not supported' if form else 'must look like sm_90'} (gemmlab builds "
                               f"for {listed}; sm_NNa from sm_90, sm_NNf from sm_100)")
