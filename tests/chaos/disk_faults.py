"""Disk faults for the chaos tests (tests/chaos/test_disk_chaos.py, docs/CHAOS.md "Disk faults").

Every broker runs under build/tests/libgregor_disk_fault_shim.so (tests/faultfs/disk_fault_shim.c):
  EIO on write    the file <trigger>-eio-write exists: every write to the broker's log dir fails
  EIO on fsync    <trigger>-eio-fsync exists: every fsync/fdatasync there fails
  disk full       the broker's log dir is a small tmpfs, filled up by a filler file
  power loss      SIGKILL, then power_loss_replay(): the dir rolled back to what was durable
                  (each file cut to its length at its last successful fsync; creates, renames
                  and unlinks not followed by an fsync of their directory undone, newest first)
The shim journals what the replay needs (see the C file's header for the line format).
"""

import glob
import os
import subprocess
import shutil

import gregor_harness as H

SHIM = os.path.join(H.BUILD, "tests", "libgregor_disk_fault_shim.so")


def preload():
    """The LD_PRELOAD value: the shim, after the ASan runtime in sanitized runs."""
    if not H.SANITIZED:
        return SHIM
    cc = shutil.which("cc") or shutil.which("gcc")
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return f"{asan}:{SHIM}"


class DiskFaults:
    """Per-broker shim settings, and the faults. work: a directory outside every log dir."""

    def __init__(self, cluster, work):
        self.cluster = cluster
        self.work = work
        self.mounts = []

    def trigger(self, b):
        return os.path.join(self.work, f"trigger-{b.id}")

    def journal(self, b):
        # next to the log dir, on its file system: the shim hard-links replaced files there
        return os.path.join(os.path.dirname(b.logdir), f"journal-{b.id}")

    def start(self, b):
        """Starts broker b under the shim (its environment only)."""
        env = {"LD_PRELOAD": preload(), "GREGOR_FAULT_DIR": b.logdir, "GREGOR_FAULT_TRIGGER": self.trigger(b),
               "GREGOR_FAULT_JOURNAL": self.journal(b)}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            b.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.cluster.wait_registered([b.id], timeout=40)

    def mount_tmpfs(self, b, size_mb):
        """Moves b's log dir onto a tmpfs of size_mb MiB (before its first start): <mount>/data,
        with its journal and the disk-full filler beside it on the same file system."""
        mnt = os.path.join(self.work, f"tmpfs-{b.id}")
        os.makedirs(mnt, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", mnt], check=True)
        self.mounts.append(mnt)
        b.logdir = os.path.join(mnt, "data")
        os.makedirs(b.logdir, exist_ok=True)

    def unmount_all(self):
        for m in self.mounts:
            subprocess.run(["umount", "-l", m], check=False)
        self.mounts = []

    def set_fault(self, b, kind, on):
        path = f"{self.trigger(b)}-{kind}"
        if on:
            open(path, "w").close()
        elif os.path.exists(path):
            os.unlink(path)

    def fill(self, b):
        """Fills b's tmpfs log dir until ENOSPC (the filler file lies outside its partitions)."""
        path = os.path.join(os.path.dirname(b.logdir), "filler")
        chunk = b"\0" * (1 << 20)
        with open(path, "ab") as f:
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass

    def unfill(self, b):
        try:
            os.unlink(os.path.join(os.path.dirname(b.logdir), "filler"))
        except FileNotFoundError:
            pass

    def settle(self, b):
        """After a crash that is no power loss (the broker halted): the page cache kept every
        write, so everything is durable; the journal and its backups (hard links that would keep
        deleted segments' space on the tmpfs) start over."""
        for p in glob.glob(self.journal(b) + ".bak.*") + [self.journal(b)]:
            if os.path.exists(p):
                os.unlink(p)

    def power_loss(self, b):
        """SIGKILL b, then roll its log dir back to what was durable; returns replay()'s counts."""
        b.kill()
        return power_loss_replay(self.journal(b), b.logdir)


def power_loss_replay(journal, logdir):
    """Rolls logdir back to the durable state the shim's journal describes, then removes the
    journal and its backups (the next incarnation starts from a durable state). Returns counts
    {"cut": files truncated, "bytes": bytes cut, "undone": directory operations undone}."""
    durable = {}  # path -> durable length; None: untouched by this incarnation's writes
    pending = []  # [kind, {dirs whose fsync makes it durable}, ...]
    lines = []
    if os.path.exists(journal):
        with open(journal) as f:
            lines = f.read().split("\n")[:-1]  # whole lines only
    for line in lines:
        f = line.split("\t")
        k = f[0]
        if k == "O":
            durable.setdefault(f[2], int(f[1]))
        elif k == "C":
            durable[f[1]] = 0
            pending.append(["C", {os.path.dirname(f[1])}, f[1]])
        elif k == "S":
            durable[f[2]] = int(f[1])
        elif k == "T":
            if durable.get(f[2]) is not None:
                durable[f[2]] = min(durable[f[2]], int(f[1]))
        elif k == "D":
            for op in pending:
                op[1].discard(f[1])
            pending = [op for op in pending if op[1]]
        elif k == "R":
            bak, frm, to = f[1], f[2], f[3]
            stash = durable.get(to)
            durable[to] = durable.pop(frm, None)
            pending.append(["R", {os.path.dirname(frm), os.path.dirname(to)}, frm, to, bak, stash])
        elif k == "U":
            bak, path = f[1], f[2]
            stash = durable.pop(path, None)
            pending.append(["U", {os.path.dirname(path)}, path, bak, stash])
    undone = 0
    for op in reversed(pending):
        undone += 1
        try:
            if op[0] == "C":
                if os.path.isfile(op[2]):
                    os.unlink(op[2])
                durable.pop(op[2], None)
            elif op[0] == "R":
                _, _, frm, to, bak, stash = op
                if os.path.lexists(to) and os.path.isdir(os.path.dirname(frm)):
                    os.rename(to, frm)
                    durable[frm] = durable.pop(to, None)
                if bak != "-" and os.path.exists(bak) and not os.path.lexists(to):
                    os.link(bak, to)
                    durable[to] = stash
            elif op[0] == "U":
                _, _, path, bak, stash = op
                if os.path.exists(bak) and not os.path.lexists(path) and os.path.isdir(os.path.dirname(path)):
                    os.link(bak, path)
                    durable[path] = stash
        except OSError:
            pass
    cut = nbytes = 0
    for path, n in durable.items():
        if n is None or not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        if size > n:
            os.truncate(path, n)
            cut += 1
            nbytes += size - n
    for p in glob.glob(journal + ".bak.*"):
        os.unlink(p)
    if os.path.exists(journal):
        os.unlink(journal)
    return {"cut": cut, "bytes": nbytes, "undone": undone}
