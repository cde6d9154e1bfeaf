"""A fault-injecting TCP proxy for the network-fault chaos tests (docs/CHAOS.md, "Network faults").

Loopback only, one background thread (selectors), no root needed. Tests put a proxy in front of
every server a broker talks to — each ZooKeeper member and each broker's listener (the broker
advertises the proxy's address, so clients, the controller and replica fetchers all go through
it) — and then change the network one link at a time:

    net = Net()
    net.pids = lambda: {b.pid: f"broker-{b.id}" for b in cluster.running()}   # who connects
    zk1 = net.proxy("zk1", ("127.0.0.1", 0), ("127.0.0.1", zk_port), groups=("zk",))
    b1 = net.proxy("broker-1", ("127.0.0.2", 0), ("127.0.0.2", real_port), groups=("broker",))
    net.cut("broker-1", "zk")          # close its connections, refuse new ones, both ways
    net.blackhole("broker-1", "broker-2")  # connections stay open, no byte moves (TCP stalls)
    net.delay("broker", "zk", 200)     # every byte waits 200 ms in each direction
    net.heal("broker-1", "zk"); net.heal()   # one rule / every rule
    net.close()

Links. A connection runs from a *source node* to the proxy's node. The source is found from the
connecting socket: its owner process (looked up in /proc/net/tcp and /proc/PID/fd among the pids
that `net.pids()` names) gives the node name ("broker-2"), anything else is "client". A node
also belongs to groups: a proxy's `groups`, and for a source named "broker-N" the group "broker"
(generally: the name up to its last '-'). A rule on (A, B) applies to a connection whose source
matches A and destination matches B, or the other way round — a link is cut in both directions —
and never to a node talking to itself (a host can always reach itself).

Fault kinds (the latest rule set on a link wins; heal removes it):
  cut        existing connections are reset (SO_LINGER 0), new ones accepted and reset at once
  blackhole  nothing is read or forwarded; connections stay open (kernel buffers fill, TCP stalls)
             and new ones are accepted but not connected onward; healing resumes the flow (as a
             network partition that heals before TCP gives up)
  delay MS   every chunk is forwarded MS milliseconds after it was read, in each direction
             (round trip + 2*MS)
"""

import collections
import os
import selectors
import socket
import struct
import threading
import time

CHUNK = 65536
HIGH_WATER = 1 << 20  # stop reading a side while this much waits to be written to the other


def _hexaddr(ip, port):
    return socket.inet_aton(ip)[::-1].hex().upper() + f":{port:04X}"


def _socket_inode(local, remote):
    """Inode of the TCP socket whose local address is `local` and remote `remote`, or None."""
    want_l, want_r = _hexaddr(*local), _hexaddr(*remote)
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[1] == want_l and parts[2] == want_r:
                    return parts[9]
    except OSError:
        pass
    return None


def _owner(inode, pids):
    """The pid among `pids` holding socket:[inode] open, or None."""
    target = f"socket:[{inode}]"
    for pid in pids:
        d = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(d):
                try:
                    if os.readlink(f"{d}/{fd}") == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def _reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Node:
    def __init__(self, name, groups=()):
        self.name = name
        self.labels = {name, *groups}
        if "-" in name:
            self.labels.add(name.rsplit("-", 1)[0])

    def matches(self, label):
        return label in self.labels


class _Pipe:
    """One direction of a connection: bytes read from src wait in `q` to be written to dst."""

    def __init__(self, src, dst):
        self.src, self.dst = src, dst
        self.q = collections.deque()  # (due monotonic time, bytes)
        self.queued = 0
        self.eof = False       # src said EOF
        self.shut = False      # dst was shut down for writing after the queue drained


class _Conn:
    def __init__(self, proxy, down, src_node):
        self.proxy = proxy
        self.down = down
        self.up = None
        self.src = src_node
        self.pipes = []
        self.closed = False
        self.bytes = 0

    def connect_up(self):
        up = socket.create_connection(self.proxy.target, timeout=1.0)
        up.setblocking(False)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.up = up
        self.pipes = [_Pipe(self.down, up), _Pipe(up, self.down)]


class Proxy:
    def __init__(self, net, name, listen, target, groups):
        self.net = net
        self.node = Node(name, groups)
        self.target = target
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(listen)
        self.lsock.listen(256)
        self.lsock.setblocking(False)
        self.addr = self.lsock.getsockname()
        self.accepted = 0

    @property
    def host(self):
        return self.addr[0]

    @property
    def port(self):
        return self.addr[1]

    def __repr__(self):
        return f"<Proxy {self.node.name} {self.addr} -> {self.target}>"


class Net:
    """Every proxy of one test and the fault rules between nodes (thread-safe)."""

    def __init__(self):
        self.pids = lambda: {}  # {pid: node name} of the processes whose connections we name
        self.lock = threading.Lock()
        self.rules = {}  # (a, b) -> ("cut",) | ("blackhole",) | ("delay", seconds)
        self.proxies = []
        self.conns = []
        self.events = []  # (monotonic time, text) of rule changes, for reports
        self.sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._interest = {}
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="netfault")
        self.thread.start()

    # ---- set-up ----
    def proxy(self, name, listen, target, groups=()):
        """A proxy for node `name` listening on `listen` (port 0: any) forwarding to `target`."""
        p = Proxy(self, name, listen, target, groups)
        with self.lock:
            self.proxies.append(p)
        self._call(lambda: self._want(p.lsock, selectors.EVENT_READ, ("listen", p)))
        return p

    def close(self):
        self._stop = True
        self._wake()
        self.thread.join(5)
        for c in self.conns:
            for s in (c.down, c.up):
                if s is not None:
                    _reset(s)
        for p in self.proxies:
            p.lsock.close()
        self.sel.close()
        self._wake_r.close()
        self._wake_w.close()

    # ---- faults ----
    def _set(self, a, b, rule):
        with self.lock:
            self.rules.pop((b, a), None)
            if rule is None:
                self.rules.pop((a, b), None)
            else:
                self.rules[(a, b)] = rule
            self.events.append((time.monotonic(), f"{rule[0] if rule else 'heal'} {a}<->{b}"))
        self._wake()

    def cut(self, a, b):
        self._set(a, b, ("cut",))

    def blackhole(self, a, b):
        self._set(a, b, ("blackhole",))

    def delay(self, a, b, ms):
        self._set(a, b, ("delay", ms / 1000.0))

    def heal(self, a=None, b=None):
        """Removes the rule on (a, b); without arguments every rule."""
        if a is None:
            with self.lock:
                self.rules.clear()
                self.events.append((time.monotonic(), "heal all"))
            self._wake()
        else:
            self._set(a, b, None)

    def rule_for(self, src, dst):
        """The rule applying to a connection from node src to node dst, or None."""
        if src.name == dst.name:
            return None
        with self.lock:
            rules = list(self.rules.items())
        for (a, b), r in rules:
            if (src.matches(a) and dst.matches(b)) or (src.matches(b) and dst.matches(a)):
                return r
        return None

    def connections(self, node=None):
        """[(source node name, proxy node name)] of the open connections (for tests and reports)."""
        with self.lock:
            return [(c.src.name, c.proxy.node.name) for c in self.conns
                    if not c.closed and (node is None or node in (c.src.name, c.proxy.node.name))]

    # ---- the loop ----
    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _call(self, fn):
        """Runs fn on the loop thread (the selector is not thread-safe)."""
        done = threading.Event()
        with self.lock:
            self._calls = getattr(self, "_calls", []) + [(fn, done)]
        self._wake()
        done.wait(5)

    def _want(self, sock, events, data):
        cur = self._interest.get(sock)
        if cur == events:
            return
        if events == 0:
            if cur is not None:
                self.sel.unregister(sock)
                del self._interest[sock]
            return
        if cur is None:
            self.sel.register(sock, events, data)
        else:
            self.sel.modify(sock, events, data)
        self._interest[sock] = events

    def _forget(self, sock):
        if sock in self._interest:
            try:
                self.sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            del self._interest[sock]

    def _close(self, c, reset=False):
        if c.closed:
            return
        c.closed = True
        for s in (c.down, c.up):
            if s is None:
                continue
            self._forget(s)
            if reset:
                _reset(s)
            else:
                try:
                    s.close()
                except OSError:
                    pass
        with self.lock:
            if c in self.conns:
                self.conns.remove(c)

    def _identify(self, sock):
        try:
            peer = sock.getpeername()
            local = sock.getsockname()
        except OSError:
            return Node("client")
        try:
            pids = self.pids() or {}
        except Exception:
            pids = {}
        inode = _socket_inode(peer, local)
        if inode is not None and pids:
            pid = _owner(inode, list(pids))
            if pid is not None:
                return Node(pids[pid])
        return Node("client")

    def _accept(self, p):
        while True:
            try:
                s, _ = p.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            p.accepted += 1
            c = _Conn(p, s, self._identify(s))
            with self.lock:
                self.conns.append(c)

    def _step(self, c, now):
        """Updates one connection for the current rules; returns the earliest due time of data
        waiting in it (or None)."""
        rule = self.rule_for(c.src, c.proxy.node)
        kind = rule[0] if rule else None
        if kind == "cut":
            self._close(c, reset=True)
            return None
        if kind == "blackhole":
            for s in (c.down, c.up):
                if s is not None:
                    self._want(s, 0, None)
            return None
        if c.up is None:
            try:
                c.connect_up()
            except OSError:
                self._close(c, reset=True)  # target down: the client sees a refused/reset connection
                return None
        c.delay = rule[1] if kind == "delay" else 0.0
        due = None
        ev = {c.down: 0, c.up: 0}
        for pipe in c.pipes:
            if not pipe.eof and pipe.queued < HIGH_WATER:
                ev[pipe.src] |= selectors.EVENT_READ
            if pipe.q:
                if pipe.q[0][0] <= now:
                    ev[pipe.dst] |= selectors.EVENT_WRITE
                else:
                    due = pipe.q[0][0] if due is None else min(due, pipe.q[0][0])
        for s, e in ev.items():
            self._want(s, e, ("conn", c))
        return due

    def _io(self, c, sock, mask, now):
        if c.closed:
            return
        for pipe in c.pipes:
            if pipe.src is sock and mask & selectors.EVENT_READ:
                try:
                    data = sock.recv(CHUNK)
                except (BlockingIOError, InterruptedError):
                    data = None
                except OSError:
                    self._close(c, reset=True)
                    return
                if data == b"":
                    pipe.eof = True
                elif data:
                    pipe.q.append((now + getattr(c, "delay", 0.0), data))
                    pipe.queued += len(data)
                    c.bytes += len(data)
            if pipe.dst is sock and mask & selectors.EVENT_WRITE:
                while pipe.q and pipe.q[0][0] <= now:
                    due, data = pipe.q[0]
                    try:
                        n = sock.send(data)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self._close(c, reset=True)
                        return
                    pipe.queued -= n
                    if n < len(data):
                        pipe.q[0] = (due, data[n:])
                        break
                    pipe.q.popleft()
        # Both sides said EOF and everything was delivered: done. One side's EOF with its queue
        # drained: pass the half-close on.
        for pipe in c.pipes:
            if pipe.eof and not pipe.q and not pipe.shut:
                pipe.shut = True
                try:
                    pipe.dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        if all(p.shut for p in c.pipes):
            self._close(c)

    def _run(self):
        while not self._stop:
            now = time.monotonic()
            with self.lock:
                calls, self._calls = getattr(self, "_calls", []), []
                conns = list(self.conns)
            for fn, done in calls:
                try:
                    fn()
                finally:
                    done.set()
            due = None
            for c in conns:
                d = self._step(c, now)
                if d is not None:
                    due = d if due is None else min(due, d)
            timeout = 0.05 if due is None else max(0.0, min(0.05, due - time.monotonic()))
            try:
                ready = self.sel.select(timeout)
            except OSError:
                continue
            now = time.monotonic()
            for key, mask in ready:
                kind, obj = key.data
                if kind == "wake":
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                elif kind == "listen":
                    self._accept(obj)
                else:
                    self._io(obj, key.fileobj, mask, now)
