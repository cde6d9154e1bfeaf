"""pytest fixtures for Gregor's process-level tests (run with /usr/bin/python3 -m pytest).

Fixtures
  zk_server   session: the shared ZooKeeper: GREGOR_ZK=host:port if set, else a private one
              started through scripts/zk.sh on a free port (stopped at session end)
  zk_connect  function: "host:port/gregor-<test>-<rand>", a fresh chroot (created) for this test
  zk          function: a kazoo client on that chroot
  cluster_factory  function: make_cluster(n=3, config={...}, start=True) -> harness.Cluster on the
              test's chroot and tmp dir; all its brokers are stopped at teardown
  cluster     function: a started 3-broker cluster (ids 1-3), registered and with a controller
  dedicated_zk  function: a ZooKeeper of the test's own (for tests that stop/restart it)
  gregorctl_sanitizer_check  autouse: in sanitized runs, fails a test after which gregorctl
              left a sanitizer report (gregor_harness.tool_sanitizer_reports)

When a test fails, the tail of every broker log it started is attached to the report.
"""

import os
import random
import re
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gregor_harness as H  # noqa: E402


@pytest.fixture(autouse=True)
def gregorctl_sanitizer_check():
    """Sanitized runs: a test after which gregorctl left a sanitizer report fails with it."""
    H.tool_sanitizer_reports()
    yield
    reports = H.tool_sanitizer_reports()
    if reports:
        pytest.fail(f"gregorctl sanitizer report(s):\n{reports[:8000]}", pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long-running variants (GREGOR_SOAK=1 runs them)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
    if rep.failed:
        for c in getattr(item, "_gregor_clusters", []):
            rep.sections.append((f"gregord logs ({c.workdir})", c.log_tails(80)))


def pytest_sessionfinish(session, exitstatus):
    H.kill_leftovers()


@pytest.fixture(scope="session", autouse=True)
def _require_binaries():
    if not os.access(H.GREGORD, os.X_OK):
        pytest.exit(f"{H.GREGORD} not built (run make)", returncode=2)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory):
    env = os.environ.get("GREGOR_ZK")
    if env:
        host, _, port = env.partition(":")
        srv = H.ZkServer(None, int(port.split("/")[0]), host=host)
        srv.external = True
        H.wait_for(lambda: H.ruok(srv.port, host), 10, f"ZooKeeper at {env} (GREGOR_ZK)")
        yield srv
        return
    srv = H.ZkServer(str(tmp_path_factory.mktemp("zk")))
    srv.external = False
    srv.start()
    try:
        yield srv
    finally:
        H.kill_leftovers()
        srv.stop()


def _chroot_name(item_name):
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", item_name)[:60]
    return f"/gregor-{base}-{random.randrange(16**6):06x}"


@pytest.fixture
def zk_connect(zk_server, request):
    chroot = _chroot_name(request.node.name)
    root = H.kazoo_client(zk_server.hosts)
    try:
        root.ensure_path(chroot)
    finally:
        H.close_kazoo(root)
    return zk_server.hosts + chroot


@pytest.fixture
def zk(zk_connect):
    c = H.kazoo_client(zk_connect)
    yield c
    H.close_kazoo(c)


@pytest.fixture
def cluster_factory(request, tmp_path):
    made = []
    request.node._gregor_clusters = made

    def make(zk_connect, n=3, config=None, start=True, workdir=None, timeout=30.0):
        wd = workdir or os.path.join(str(tmp_path), f"cluster{len(made)}")
        c = H.Cluster(wd, zk_connect, n=n, config=config)
        made.append(c)
        if start:
            c.start(timeout=timeout)
        return c

    yield make
    errors = []
    for c in made:
        try:
            c.close()
        except Exception as e:  # keep closing the others
            errors.append(f"{c.workdir}: {e}")
    H.kill_leftovers()
    if errors:
        raise AssertionError("cluster teardown: " + "; ".join(errors))


@pytest.fixture
def cluster(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=3)


@pytest.fixture
def dedicated_zk(tmp_path):
    d = tempfile.mkdtemp(prefix="zk-", dir=str(tmp_path))
    srv = H.ZkServer(d)
    srv.start()
    yield srv
    H.kill_leftovers()
    srv.stop()
