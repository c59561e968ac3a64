"""Test-session setup: the harness's Hypothesis profiles, and PostgreSQL for the run.

Profiles: ``ci`` when ``CI`` is set in the environment, ``dev`` otherwise;
``pytest --hypothesis-profile=thorough`` (or any of the three) overrides both.

PostgreSQL: ``AGTOOL_TEST_POSTGRES`` names the server when it is set (``.ci/run``
sets it). Otherwise the session starts a throwaway one where Debian's binaries
are installed, for every xdist worker alike, and stops it at the end. Where none
can be had, the Postgres tests skip with one line saying how to enable them,
and the PostgreSQL store is left out of the coverage floor, which is computed on
what ran.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from _pg import ENV, HOW, NO_SERVER

from agtool.harness.strategies.profiles import load_default_profile

load_default_profile()

_POSTGRES_STORE = "*/agtool/_store/postgres.py"
_WITHOUT_POSTGRES = "skipped without PostgreSQL"
_stop_postgres: list[Callable[[], None]] = []


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its controller decided, and the environment says so
    if not os.environ.get(ENV):
        import _pg_server

        started = _pg_server.start()
        if started is not None:
            os.environ[ENV], stop = started
            _stop_postgres.append(stop)
    if not os.environ.get(ENV):
        _leave_out_of_coverage(config, _POSTGRES_STORE)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _stop_postgres:
        _stop_postgres.pop()()


def pytest_report_header(config: pytest.Config) -> str:
    if _stop_postgres:
        return f"PostgreSQL: a throwaway server for this run at {os.environ[ENV]}"
    if os.environ.get(ENV):
        return f"PostgreSQL: {os.environ[ENV]}"
    return (f"PostgreSQL: none here, so its tests skip and agtool/_store/postgres.py is left "
            f"out of the coverage floor ({HOW})")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # One line for the whole group instead of a line per test in -ra's summary; the closing
    # count still names them ("12 skipped without PostgreSQL").
    skipped = terminalreporter.stats.get("skipped", [])
    without = [report for report in skipped if NO_SERVER in str(report.longrepr)]
    if without:
        terminalreporter.stats["skipped"] = [report for report in skipped
                                             if report not in without]
        terminalreporter.stats[_WITHOUT_POSTGRES] = without
        terminalreporter.write_line(f"{len(without)} PostgreSQL tests skipped: {HOW}")


def _leave_out_of_coverage(config: pytest.Config, pattern: str) -> None:
    # pytest-cov reports with coverage's own configuration: adding to report_omit leaves the
    # file out of the total that --cov-fail-under is compared with, and out of the table.
    # The report is made by the object that combines the workers' data, where there is one.
    plugin = config.pluginmanager.getplugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    for name in ("cov", "combining_cov"):
        coverage = getattr(controller, name, None)
        if coverage is not None:
            coverage.config.report_omit = [*(coverage.config.report_omit or []), pattern]
