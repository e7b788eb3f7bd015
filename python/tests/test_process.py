"""Process-level behaviour: the GIL is released while waiting, Ctrl-C interrupts a blocking lock(), fork() works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import fencelock


def test_gil_released_while_waiting(sqlite_url: str, name: str) -> None:
    a, b = fencelock.connect(sqlite_url), fencelock.connect(sqlite_url)
    held = a.lock(name)
    counting, stop = [0], threading.Event()

    def count() -> None:
        while not stop.is_set():
            counting[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = counting[0]
        with pytest.raises(fencelock.Timeout):
            b.lock(name, timeout=1.0)
        during = counting[0] - before
    finally:
        stop.set()
        t.join()
        held.release()
    assert during > 100_000, f"the counting thread advanced only {during} times while lock() waited"


# The child says "waiting" once its lock() is inside the client's wait loop (the name has a local queue entry), not
# merely about to be called: a SIGINT before that would test nothing.
CHILD = textwrap.dedent(
    """
    import sys, threading, time, fencelock
    client = fencelock.connect(sys.argv[1])

    def announce():
        deadline = time.monotonic() + 10
        while client.local_entries() == 0:
            if time.monotonic() > deadline:
                print("lock() never started waiting", flush=True)
                return
            time.sleep(0.005)
        print("waiting", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        client.lock(sys.argv[2])
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        deadline = time.monotonic() + 5
        while client.local_entries() and time.monotonic() < deadline:
            time.sleep(0.01)
        sys.exit(0 if client.local_entries() == 0 else 3)
    sys.exit(2)
    """
)


def test_ctrl_c_interrupts_a_blocking_lock(sqlite_url: str, name: str) -> None:
    holder = fencelock.connect(sqlite_url)
    held = holder.lock(name)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, sqlite_url, name], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "waiting"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "interrupted"
        interrupted_after = time.monotonic() - sent
        assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert interrupted_after < 1.0, f"KeyboardInterrupt took {interrupted_after:.2f}s"
    held.release()
    assert holder.inspect(name).holder is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_fork_child_does_not_hang(sqlite_url: str, name: str) -> None:
    parent = fencelock.connect(sqlite_url)
    with parent.lock(name):  # the runtime's threads are running
        pass
    pid = os.fork()
    if pid == 0:  # the child: a new client works; the parent's refuses instead of hanging
        code = 1
        try:
            child = fencelock.connect(sqlite_url)
            with child.lock(name, timeout=5.0) as lease:
                assert lease.fence > 0
            try:
                parent.try_lock(name)
                code = 4
            except fencelock.Closed:
                code = 0
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.02)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    with parent.lock(name, timeout=5.0):  # and the parent still works
        pass
