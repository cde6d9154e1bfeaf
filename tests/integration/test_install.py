"""`make install` (PREFIX, DESTDIR), the systemd unit and the example production configuration:
installs into a temporary DESTDIR, lints the unit with `systemd-analyze verify` (when present),
and runs the *installed* gregord with the *installed* example configuration (only the
host-specific keys overridden) until it registers, then stops it with SIGTERM (exit 0)."""

import os
import shutil
import signal
import subprocess

import pytest

import gregor_harness as H


def make_install(destdir, prefix):
    r = subprocess.run(["make", "-C", H.ROOT, "install", f"BUILD={H.BUILD}", f"DESTDIR={destdir}",
                        f"PREFIX={prefix}"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"make install failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def unit_fields(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")) and "=" in line:
                k, v = line.split("=", 1)
                out.setdefault(k, v)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("destdir"))
    make_install(dest, "/usr")
    return dest


def test_layout_prefix_usr(installed):
    for rel in ("usr/bin/gregord", "usr/bin/gregorctl"):
        assert os.access(os.path.join(installed, rel), os.X_OK), rel
    for rel in ("usr/lib/systemd/system/gregord.service", "etc/gregor/server.properties.example",
                "usr/share/doc/gregor/OPERATIONS.md"):
        assert os.path.isfile(os.path.join(installed, rel)), rel
    u = unit_fields(os.path.join(installed, "usr/lib/systemd/system/gregord.service"))
    assert u["ExecStart"] == "/usr/bin/gregord /etc/gregor/server.properties"
    assert u["Restart"] == "on-failure"
    assert u["KillSignal"] == "SIGTERM"
    assert int(u["TimeoutStopSec"]) >= 120
    assert int(u["LimitNOFILE"]) >= 65536
    assert u["Type"] in ("simple", "notify")


def test_layout_prefix_usr_local(tmp_path):
    dest = str(tmp_path / "d")
    make_install(dest, "/usr/local")
    assert os.access(os.path.join(dest, "usr/local/bin/gregord"), os.X_OK)
    assert os.path.isfile(os.path.join(dest, "usr/local/etc/gregor/server.properties.example"))
    u = unit_fields(os.path.join(dest, "usr/local/lib/systemd/system/gregord.service"))
    assert u["ExecStart"] == "/usr/local/bin/gregord /usr/local/etc/gregor/server.properties"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_verifies(installed, tmp_path):
    """systemd-analyze verify checks the syntax, every key and that ExecStart is executable: point
    ExecStart at the DESTDIR copy (the unit itself names /usr/bin/gregord)."""
    src = os.path.join(installed, "usr/lib/systemd/system/gregord.service")
    text = open(src).read().replace("ExecStart=/usr/bin/gregord", f"ExecStart={installed}/usr/bin/gregord")
    unit = tmp_path / "gregord.service"
    unit.write_text(text)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip() and not r.stdout.strip(), \
        f"systemd-analyze verify: rc {r.returncode}\n{r.stdout}\n{r.stderr}"


def test_installed_broker_runs_example_config(installed, zk_connect, zk, tmp_path):
    """The example configuration is valid as shipped (no unknown key, no invalid value): only
    the per-host keys are overridden."""
    port = H.free_port()
    logdir = tmp_path / "data"
    log = tmp_path / "gregord.log"
    args = [os.path.join(installed, "usr/bin/gregord"), os.path.join(installed, "etc/gregor/server.properties.example"),
            "--override", "broker.id=7",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"zookeeper.connect={zk_connect}",
            "--override", f"log.dirs={logdir}",
            "--override", "zookeeper.session.timeout.ms=6000"]
    with open(log, "wb") as out:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        H.wait_for(lambda: p.poll() is not None or zk.exists("/brokers/ids/7"), 30,
                   "the installed gregord registered")
        assert p.poll() is None, f"gregord exited {p.returncode}:\n{log.read_text()[-3000:]}"
        text = log.read_text()
        assert "unknown configuration" not in text, text[-3000:]
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
