"""`agtool mcp proxy` in front of each real third-party server: the trial table, measured.

    bash tests/thirdparty/install.sh          # once: the pinned servers
    python bench/trial_proxy_real.py          # every installed server
    python bench/trial_proxy_real.py --servers sqlite memory

For each server (``tests/thirdparty/servers.py``, in a sandbox of temporary state),
``tests/thirdparty/proxy_trials.py`` starts the proxy and measures the tools listed,
served and hidden (with the keyword named), and a stale-read, an empty-result, a
cross-client write and an upstream-crash trial. Prints the markdown table the
README's proxy section shows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/thirdparty describes the servers and trials

from thirdparty.proxy_trials import PLANS, markdown, run_trials  # type: ignore[import-not-found]  # noqa: E402
from thirdparty.servers import SERVERS, installed  # type: ignore[import-not-found]  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", nargs="*", default=sorted(PLANS), choices=sorted(PLANS))
    args = parser.parse_args(argv)
    rows = []
    for name in args.servers:
        if not installed(SERVERS[name]):
            print(f"{name}: not installed (bash tests/thirdparty/install.sh)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix=f"trial-{name}-") as tmp:
            rows.append(run_trials(name, Path(tmp)))
        print(f"{name}: done", file=sys.stderr)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
