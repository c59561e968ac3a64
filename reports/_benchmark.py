"""The benchmark's ratios, measured in the same run as the rest of the report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["BENCH_SCRIPT", "load_script", "measure_benchmark"]

#: The benchmark lives beside the package in the repository, not in the library.
BENCH_SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "bench_gate.py"


#: What the report keeps of the bench's figures: ratios, never raw nanoseconds.
KEPT = ("method", "quick", "rounds", "load_before", "logging", "ratios", "targets", "unavailable",
        "passed")


def load_script(path: Path, name: str) -> Any:
    """The bench script at ``path``, imported as module ``name`` (not a package of ours)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.exists():
        raise FileNotFoundError(f"the benchmark script is missing: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def measure_benchmark() -> dict[str, Any]:
    """Run ``bench/bench_gate.py``'s quick plan; ratios to a bare call and every target.

    Each target carries its limit, the median of its per-round ratios, the middle
    half of those ratios and its verdict, or ``available: False`` when the gate
    under test lacks the API it times.
    """
    figures: dict[str, Any] = load_script(BENCH_SCRIPT, "agtool_bench_gate").measure(quick=True)
    return {key: figures[key] for key in KEPT}
