"""pytest setup for tests/chaos: reuses tests/integration's fixtures (zk_server, zk_connect,
cluster_factory, dedicated_zk, ...) and hooks by loading that conftest under another module name,
and prints the chaos summary table (fault, rounds, acknowledged, lost, duplicated, recovery) at
the end of the session. GREGOR_CHAOS_REPORT=PATH also writes the rows as JSON."""

import importlib.util
import json
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_integration = os.path.join(os.path.dirname(_here), "integration")
sys.path.insert(0, _integration)
sys.path.insert(0, _here)

_spec = importlib.util.spec_from_file_location("gregor_integration_conftest",
                                               os.path.join(_integration, "conftest.py"))
_it = importlib.util.module_from_spec(_spec)
sys.modules["gregor_integration_conftest"] = _it
_spec.loader.exec_module(_it)

# Fixtures and hooks, re-exported so pytest finds them in this conftest.
pytest_configure = _it.pytest_configure
pytest_runtest_makereport = _it.pytest_runtest_makereport
pytest_sessionfinish = _it.pytest_sessionfinish
_require_binaries = _it._require_binaries
zk_server = _it.zk_server
zk_connect = _it.zk_connect
zk = _it.zk
cluster_factory = _it.cluster_factory
cluster = _it.cluster
dedicated_zk = _it.dedicated_zk


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    try:
        import chaos_lib
    except ImportError:
        return
    if not chaos_lib.RESULTS:
        return
    terminalreporter.section("chaos summary")
    for line in chaos_lib.format_table(chaos_lib.RESULTS).splitlines():
        terminalreporter.write_line(line)
    path = os.environ.get("GREGOR_CHAOS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(chaos_lib.RESULTS, f, indent=1)
