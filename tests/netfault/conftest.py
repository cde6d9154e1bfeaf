"""pytest setup for tests/netfault (network faults: ZooKeeper ensemble, fault proxies): the chaos
suite's fixtures, hooks and summary table, by loading tests/chaos/conftest.py (which itself
reuses tests/integration/conftest.py) under another module name. A directory of its own so
scripts/test-all.sh runs it as a separate stage with its own time budget."""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_chaos = os.path.join(os.path.dirname(_here), "chaos")
sys.path.insert(0, _here)

_spec = importlib.util.spec_from_file_location("gregor_chaos_conftest", os.path.join(_chaos, "conftest.py"))
_c = importlib.util.module_from_spec(_spec)
sys.modules["gregor_chaos_conftest"] = _c
_spec.loader.exec_module(_c)


def pytest_configure(config):
    _c.pytest_configure(config)
    config.addinivalue_line("markers", "broker_config(dict): extra broker settings for the netcluster fixture")


pytest_runtest_makereport = _c.pytest_runtest_makereport
pytest_sessionfinish = _c.pytest_sessionfinish
pytest_terminal_summary = _c.pytest_terminal_summary
_require_binaries = _c._require_binaries
zk_server = _c.zk_server
zk_connect = _c.zk_connect
zk = _c.zk
cluster_factory = _c.cluster_factory
cluster = _c.cluster
dedicated_zk = _c.dedicated_zk
