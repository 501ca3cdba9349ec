"""Live MCP servers ready for episodes: each episode from a fresh state, without waiting for a
server to start every time.

A server's ``"state"`` in the client configuration (a toolbias extension, like ``"setup"``) says
where the server keeps what an episode changes, and so what "fresh" takes:

* ``"process"`` (the default; safe for any server): anywhere, its memory included. Each episode
  gets a server process of its own, in a fresh copy of the working directory; the pool starts
  the next one while an episode runs, so a steady run waits for no start-up.
* ``"cwd"``: only in its working directory (``mcp-server-git --repository .``). A server is
  reused from episode to episode, its working directory restored to the fresh copy in between.
* ``"none"``: nowhere (``mcp-server-time``). A server is reused as it is.

The fresh copy is built once per pool: the configuration's ``cwd`` copied and its ``setup``
commands run in the copy (keep them deterministic: fixed dates for git). A server leased to an
episode is that episode's alone (episodes of one process interleave at their awaits) until it
is given back; a server that failed is closed, never reused. Pools belong to the process that
made them (a forked worker makes its own) and are closed when it exits (:func:`close_pools`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..errors import CatalogError

#: the values of a server's ``"state"``, and what each means (the module doc)
STATES = ("process", "cwd", "none")
#: pools kept at once; the least recently used beyond this is closed (a test session or a
#: script that opens many configurations keeps at most this many servers running idle)
MAX_POOLS = 4
#: seconds :meth:`ServerPool.close` waits for a server given back to finish closing
CLOSE_TIMEOUT_S = 15.0
#: seconds a ``setup`` command may take
SETUP_TIMEOUT_S = 30.0


def server_state(server: Mapping[str, Any], where: str) -> str:
    """The server's ``"state"`` (default ``process``), refused when it is none of :data:`STATES`."""
    state = server.get("state", "process")
    if state not in STATES:
        raise CatalogError(f"unknown 'state' {state!r}", where=where,
                           fix='write "state": "process" (any server; the default), "cwd" (the server keeps '
                               'its state only in its working directory) or "none" (it keeps none)')
    return str(state)


def run_setup(server: Mapping[str, Any], workdir: str) -> None:
    """The server's ``setup`` commands (a list of argument lists), run in ``workdir``."""
    env = {**os.environ, **server.get("env", {})}
    for argv in server.get("setup") or []:
        subprocess.run([str(a) for a in argv], cwd=workdir, env=env, check=True, timeout=SETUP_TIMEOUT_S,
                       capture_output=True)


def fresh_workdir(server: Mapping[str, Any]) -> str | None:
    """A new temporary folder holding the server's fresh state (its ``cwd`` copied, its ``setup``
    run in the copy), or None when the server names neither."""
    if not (server.get("cwd") or server.get("setup")):
        return None
    workdir = tempfile.mkdtemp(prefix="toolbias-mcp-")
    try:
        if server.get("cwd"):
            shutil.copytree(server["cwd"], workdir, dirs_exist_ok=True, symlinks=True)
        run_setup(server, workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return workdir


def restore(workdir: str, template: str) -> None:
    """``workdir`` made a copy of ``template`` again, in place (a server running in it keeps its
    working directory). Only what differs is copied: a file is taken as unchanged when its size,
    mode and modification time equal the template's (copies keep the template's times, and
    anything written since has a later one), as rsync does; what the template lacks is removed."""
    want = {e.name: e for e in os.scandir(template)}
    for entry in os.scandir(workdir):
        w = want.get(entry.name)
        if w is None or _kind(w) != _kind(entry):
            _remove(entry)
    for name, w in want.items():
        target = os.path.join(workdir, name)
        kind = _kind(w)
        if kind == "link":
            if not os.path.islink(target):
                os.symlink(os.readlink(w.path), target)
            elif os.readlink(target) != os.readlink(w.path):
                os.unlink(target)
                os.symlink(os.readlink(w.path), target)
        elif kind == "dir":
            if os.path.isdir(target):
                restore(target, w.path)
            else:
                shutil.copytree(w.path, target, symlinks=True)
        else:
            want_st = w.stat(follow_symlinks=False)
            try:
                st = os.lstat(target)
                same = (st.st_size, st.st_mode, st.st_mtime_ns) == (want_st.st_size, want_st.st_mode,
                                                                     want_st.st_mtime_ns)
            except FileNotFoundError:
                same = False
            if not same:
                if os.path.lexists(target):
                    os.chmod(target, 0o600)  # git writes its objects read-only
                shutil.copy2(w.path, target)


def _kind(entry: os.DirEntry[str]) -> str:
    return "link" if entry.is_symlink() else "dir" if entry.is_dir(follow_symlinks=False) else "file"


def _remove(entry: os.DirEntry[str]) -> None:
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path)
    else:
        os.unlink(entry.path)


class Live:
    """What a live server is to the pool: ``call(name, arguments)`` and ``close()``."""

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


#: starts a live server for a configuration entry (its ``cwd`` the episode's working directory)
Starter = Callable[[Mapping[str, Any]], Live]


@dataclass
class Lease:
    """A server leased to one episode, and the working directory it runs in (None: none)."""

    server: Live
    workdir: str | None


class ServerPool:
    """The servers of one configuration entry (see the module doc)."""

    def __init__(self, spec: Mapping[str, Any], start: Starter, *, where: str = "") -> None:
        self.spec = dict(spec)
        self.state = server_state(spec, where or str(spec.get("command") or spec.get("url")))
        self._start_server = start
        self._lock = threading.Lock()
        self._template: str | None = None
        self._templated = False
        self._idle: list[Lease] = []
        self._spare: Future[Lease] | None = None
        self._leased = 0
        self._closed = False
        self._closing: list[threading.Thread] = []
        self.started = 0  # servers started so far (a figure for benchmarks and tests)

    @property
    def ahead(self) -> bool:
        """A server is being (or has been) started for the next episode."""
        return self._spare is not None

    def _template_dir(self) -> str | None:
        with self._lock:
            if not self._templated:
                self._template = fresh_workdir(self.spec)
                self._templated = True
            return self._template

    def _start(self) -> Lease:
        template = self._template_dir()
        workdir = None
        if template is not None:
            workdir = tempfile.mkdtemp(prefix="toolbias-mcp-")
            shutil.copytree(template, workdir, dirs_exist_ok=True, symlinks=True)
        spec = {**self.spec, **({"cwd": workdir} if workdir else {})}
        try:
            server = self._start_server(spec)
        except BaseException:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        global _STARTED
        with self._lock:
            self.started += 1
            _STARTED += 1
        return Lease(server, workdir)

    def _start_ahead(self) -> None:
        fut: Future[Lease] = Future()

        def target() -> None:
            try:
                fut.set_result(self._start())
            except BaseException as exc:  # noqa: BLE001 - the next lease raises it
                fut.set_exception(exc)

        self._spare = fut
        threading.Thread(target=target, daemon=True, name="toolbias-mcp-spare").start()

    def lease(self) -> Lease:
        """A server from a fresh state, the caller's until :meth:`give_back`; raises what its
        start-up raised."""
        with self._lock:
            self._leased += 1
            idle = self._idle.pop() if self._idle else None
            spare, self._spare = (self._spare, None) if self.state == "process" else (None, None)
            ahead = self.state == "process" and self._leased > 1  # a pool used once starts nothing ahead
        if idle is not None:
            return idle
        try:
            return spare.result() if spare is not None else self._start()
        finally:
            if ahead:
                with self._lock:
                    self._start_ahead()

    def give_back(self, lease: Lease, *, healthy: bool) -> None:
        """The episode is over: a reusable server (state ``cwd``/``none``, ``healthy``) is kept
        for the next episode, its working directory restored; any other is closed."""
        if healthy and self.state != "process" and not self._closed:
            try:
                if lease.workdir and self._template:
                    restore(lease.workdir, self._template)
            except OSError:
                healthy = False
            else:
                with self._lock:
                    self._idle.append(lease)
                return
        # closing waits for the server to exit (most of a second): the next episode need not
        closer = threading.Thread(target=_discard, args=(lease,), daemon=True, name="toolbias-mcp-close")
        with self._lock:
            self._closing = [t for t in self._closing if t.is_alive()] + [closer]
        closer.start()

    def close(self) -> None:
        """Close every server the pool holds (leased ones are closed by their :meth:`give_back`)."""
        with self._lock:
            idle, self._idle = self._idle, []
            spare, self._spare = self._spare, None
            template, self._template, self._templated = self._template, None, False
            self._closed = True
        for lease in idle:
            _discard(lease)
        if spare is not None:
            try:
                _discard(spare.result())
            except BaseException:  # noqa: BLE001 - it never started
                pass
        if template:
            shutil.rmtree(template, ignore_errors=True)
        for closer in self._closing:
            closer.join(CLOSE_TIMEOUT_S)


def _discard(lease: Lease) -> None:
    try:
        lease.server.close()
    finally:
        if lease.workdir:
            shutil.rmtree(lease.workdir, ignore_errors=True)


_POOLS: OrderedDict[str, ServerPool] = OrderedDict()
_STARTED = 0
_POOLS_PID = os.getpid()
_POOLS_LOCK = threading.Lock()


def pool_for(spec: Mapping[str, Any], start: Starter, *, where: str = "") -> ServerPool:
    """This process's pool for the configuration entry ``spec`` (made on first use)."""
    global _POOLS_PID
    key = json.dumps(spec, sort_keys=True, default=str)
    evicted: list[ServerPool] = []
    with _POOLS_LOCK:
        if _POOLS_PID != os.getpid():  # a forked child: the parent's servers are not its own
            _POOLS.clear()
            _POOLS_PID = os.getpid()
            # a multiprocessing worker leaves through os._exit (no atexit): close its servers
            # (and reap them) when it ends, not leave them to exit on their own
            from multiprocessing import util

            util.Finalize(None, close_pools, exitpriority=0)
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ServerPool(spec, start, where=where)
            while len(_POOLS) > MAX_POOLS:
                evicted.append(_POOLS.popitem(last=False)[1])
        _POOLS.move_to_end(key)
    for old in evicted:
        old.close()
    return pool


def servers_started() -> int:
    """Servers this process has started for episodes (a figure for benchmarks)."""
    return _STARTED


def close_pools() -> None:
    """Close every pool of this process (run at exit)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values()) if _POOLS_PID == os.getpid() else []
        _POOLS.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)

__all__ = ["MAX_POOLS", "STATES", "Lease", "Live", "ServerPool", "close_pools", "fresh_workdir", "pool_for",
           "restore", "run_setup", "server_state", "servers_started"]
