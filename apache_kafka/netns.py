"""Network namespaces for one Kafka run: each node in its own, so that one can be cut off.

Shape. Node i runs in the namespace `isrlab-<run>-b<i>`, whose one interface `eth0` holds
10.77.K.(i+1)/24. Each `eth0` is one end of a veth pair whose other end is a port of the
bridge `hub` in the run's namespace `isrlab-<run>-hub`; one more veth pair joins the hub to
the root namespace, where its end is the link `isrlab-<run>` holding 10.77.K.254/24. The
nodes share one Ethernet segment, so nothing forwards and no sysctl changes, and the root
namespace, where the clients run, reaches every node over its one link. That link is all a
run puts in the root namespace, and it goes when the hub's namespace does. K is the first
/24 of 10.77.0.0/16 that no address or route of the root namespace overlaps, chosen under a
lock so that two runs at once never pick the same one.

Partitions. Cutting node i adds `blackhole` routes: in i's namespace one for each peer's /32,
and in each peer's namespace one for i's. A packet between them is dropped by its sender in
either direction: a connect() fails at once on the side that holds the route and times out
on the other, and an established connection stalls until the application gives up on it, as
over a broken link. The root namespace's address is never blackholed, so clients still reach
the cut node. Healing deletes the routes.

Names and leftovers. `<run>` is the owning process's pid and a letter (one per network the
process makes), which keeps the root link's name within Linux's 15 bytes (`isrlab-4194304z`).
`create()` first sweeps every `isrlab-` namespace and root link whose owning pid is gone: a
run killed with SIGKILL leaves its namespaces behind (its JVMs die with it), and the next run
removes them. `destroy()` removes what its run created, whatever happened before.

What it leaves out: IPv6, and partial partitions (a cut is always one node against all the
others; the root namespace is on both sides).
"""

from __future__ import annotations

import ctypes
import ipaddress
import itertools
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

PREFIX = "isrlab-"
NETNS_DIR = Path("/run/netns")
SUPERNET = ipaddress.ip_network("10.77.0.0/16")
CLIENT_HOST = 254  # the root namespace's address in the run's /24
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"isrlab-([0-9]+)([a-z])(?:-(?:b[0-9]+|hub))?")
_runs = itertools.count()


class NetnsError(RuntimeError):
    """A namespace, link or route could not be made or removed: one line saying which."""


def _ip(*args: str, ns: str | None = None, missing_ok: bool = False) -> str:
    cmd = ["ip", *(("-n", ns) if ns else ()), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetnsError("`ip` (iproute2) is not installed") from None
    except subprocess.TimeoutExpired:
        raise NetnsError(f"`{' '.join(cmd)}` did not finish within 30 s") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        gone = ("Cannot find device", "No such file", "No such process", "does not exist",
                "Invalid netns name")
        if missing_ok and any(g in said for g in gone):
            return ""
        raise NetnsError(f"`{' '.join(cmd)}` failed: {said}")
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def namespaces() -> list[str]:
    """Every `isrlab-` namespace on the machine, sorted."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))
    except FileNotFoundError:
        return []


def root_links() -> list[str]:
    """Every `isrlab-` link of the root namespace, sorted."""
    names = []
    for line in _ip("-o", "link", "show").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX):
                names.append(name)
    return sorted(names)


def sweep() -> list[str]:
    """Remove the namespaces and root links of runs whose owning process is gone; return
    their names."""
    removed = []
    for name in root_links():
        match = _NAME.fullmatch(name)
        if match and not _alive(int(match[1])):
            _ip("link", "del", "dev", name, missing_ok=True)
            removed.append(name)
    for name in namespaces():
        match = _NAME.fullmatch(name)
        if match and not _alive(int(match[1])):
            _ip("netns", "del", name, missing_ok=True)
            removed.append(name)
    return removed


def _taken() -> list[ipaddress.IPv4Network]:
    """The networks the root namespace already has an address in or a route to."""
    taken = []
    for line in _ip("-o", "-4", "addr", "show").splitlines():
        match = re.search(r"\binet ([0-9./]+)", line)
        if match:
            taken.append(ipaddress.ip_network(match[1], strict=False))
    for line in _ip("-4", "route", "show", "table", "all").splitlines():
        for word in line.split()[:2]:
            try:
                net = ipaddress.ip_network(word, strict=False)
            except ValueError:
                continue
            taken.append(net)
            break
    return taken


class _Lock:
    """One run at a time chooses its subnet and claims it. The lock is an abstract Unix socket
    name of the root namespace (`ip` itself flocks /run/netns): it leaves no file behind and
    goes with its holder, however that ends."""

    NAME = b"\0isrlab-netns-lock"

    def __enter__(self) -> _Lock:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.sock.bind(self.NAME)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.sock.close()
                    raise NetnsError("another run held the namespace lock for 60 s") from None
                time.sleep(0.02)

    def __exit__(self, *exc) -> None:
        self.sock.close()


def enter(fd: int) -> None:
    """Move the calling thread into the network namespace that `fd` names (in a child process
    before it execs: the whole process)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


class Network:
    """One run's namespaces, bridge and links (see the module docstring). `create()` builds
    them, `destroy()` removes them; both are safe to call again."""

    def __init__(self, nodes: int):
        assert 1 <= nodes < CLIENT_HOST - 1, f"{nodes} nodes do not fit one /24"
        self.nodes = nodes
        self.run = f"{os.getpid()}{chr(ord('a') + next(_runs) % 26)}"
        self.link = f"{PREFIX}{self.run}"
        assert len(self.link) <= 15, f"{self.link}: longer than a Linux interface name"
        self.hub = f"{self.link}-hub"
        self.names = [f"{self.link}-b{i}" for i in range(nodes)]
        self.subnet: ipaddress.IPv4Network | None = None
        self.cut_off: set[int] = set()
        self._made: list[str] = []  # namespaces and the root link, in the order made

    def address(self, i: int) -> str:
        """Node i's address (inside its namespace)."""
        assert self.subnet is not None, "the network is not created"
        return str(self.subnet[i + 1])

    @property
    def client_address(self) -> str:
        """The root namespace's address on the run's segment."""
        assert self.subnet is not None, "the network is not created"
        return str(self.subnet[CLIENT_HOST])

    def create(self) -> None:
        """Sweep dead runs' leftovers, then build this run's namespaces; on any failure remove
        what was made and raise NetnsError."""
        try:
            sweep()
            with _Lock():
                taken = _taken()
                self.subnet = next((net for net in SUPERNET.subnets(new_prefix=24)
                                    if not any(net.overlaps(t) for t in taken
                                               if t.prefixlen > 0)), None)
                if self.subnet is None:
                    raise NetnsError(f"no /24 of {SUPERNET} is free in the root namespace")
                self._netns(self.hub)
                _ip("link", "add", "name", "hub", "type", "bridge", ns=self.hub)
                _ip("link", "set", "dev", "hub", "up", ns=self.hub)
                _ip("link", "add", "name", self.link, "type", "veth", "peer", "name", "uplink",
                    "netns", self.hub)
                self._made.append(self.link)
                _ip("addr", "add", f"{self.client_address}/24", "dev", self.link)
            _ip("link", "set", "dev", "uplink", "master", "hub", "up", ns=self.hub)
            _ip("link", "set", "dev", self.link, "up")
            for i, name in enumerate(self.names):
                self._netns(name)
                _ip("link", "add", "name", f"b{i}", "type", "veth", "peer", "name", "eth0",
                    "netns", name, ns=self.hub)
                _ip("link", "set", "dev", f"b{i}", "master", "hub", "up", ns=self.hub)
                _ip("addr", "add", f"{self.address(i)}/24", "dev", "eth0", ns=name)
                _ip("link", "set", "dev", "eth0", "up", ns=name)
                _ip("link", "set", "dev", "lo", "up", ns=name)
        except BaseException:
            self.destroy()
            raise

    def _netns(self, name: str) -> None:
        self._made.append(name)
        _ip("netns", "add", name)

    def destroy(self) -> None:
        """Remove everything `create()` made, SIGINT and SIGTERM held off until it is done.
        The processes in a namespace must be gone first: a namespace outlives its name while
        one runs in it."""
        main = threading.current_thread() is threading.main_thread()
        if main:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            failed = []
            for name in reversed(self._made):
                try:
                    if name == self.link:
                        _ip("link", "del", "dev", name, missing_ok=True)
                    else:
                        _ip("netns", "del", name, missing_ok=True)
                except NetnsError as error:
                    failed.append(str(error))
            left = self.leftovers()
            self._made = [n for n in self._made if n in left]
            self.cut_off.clear()
            if failed:
                raise NetnsError(failed[0])
        finally:
            if main:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def leftovers(self) -> list[str]:
        """This run's namespaces and root link that still exist."""
        mine = [n for n in namespaces() if n.startswith(f"{self.link}-")]
        return mine + [n for n in root_links() if n == self.link]

    # Partitions -----------------------------------------------------------------------------

    def _routes(self, i: int) -> list[tuple[str, str]]:
        """(namespace, destination) of every blackhole route that cuts node i off."""
        peers = [j for j in range(self.nodes) if j != i]
        return ([(self.names[i], self.address(j)) for j in peers]
                + [(self.names[j], self.address(i)) for j in peers])

    def cut(self, i: int) -> None:
        """Cut node i off from every other node, both ways; clients still reach it."""
        for ns, dest in self._routes(i):
            _ip("route", "replace", "blackhole", f"{dest}/32", ns=ns)
        self.cut_off.add(i)

    def heal(self, i: int) -> None:
        """Undo `cut(i)`."""
        for ns, dest in self._routes(i):
            _ip("route", "del", "blackhole", f"{dest}/32", ns=ns, missing_ok=True)
        self.cut_off.discard(i)

    # Processes ------------------------------------------------------------------------------

    def open(self, i: int) -> int:
        """A file descriptor of node i's namespace, for `enter` in a child process; the caller
        closes it."""
        return os.open(NETNS_DIR / self.names[i], os.O_RDONLY | os.O_CLOEXEC)

    def socket(self, i: int, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """An IPv4 socket of node i's namespace, made here: a thread enters the namespace,
        makes the socket and ends, and the socket stays in that namespace."""
        fd = self.open(i)
        made: list = []

        def inside() -> None:
            try:
                enter(fd)
                made.append(socket.socket(socket.AF_INET, kind))
            except OSError as error:
                made.append(error)
        try:
            thread = threading.Thread(target=inside, name=f"netns-{self.names[i]}")
            thread.start()
            thread.join()
        finally:
            os.close(fd)
        if isinstance(made[0], OSError):
            raise NetnsError(f"entering {self.names[i]}: {made[0].strerror}")
        return made[0]

