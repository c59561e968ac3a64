"""The harness's Hypothesis strategies, for a checkout of this repository.

The strategies live in ``agtool.harness.strategies`` and are installed with
agtool; this folder is their face at the top of the repository, where the
project keeps its strategies, so ``from strategies import valid_args`` works
from a checkout as ``from agtool.harness.strategies import valid_args`` does
anywhere. It adds nothing of its own and is not in the wheel.
"""

from agtool.harness.strategies import *  # noqa: F403 - the face re-exports every public name
from agtool.harness.strategies import __all__ as __all__
