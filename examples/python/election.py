"""fencelock from Python: three candidates take turns as the publisher; an observer sees every change of leader.

    python examples/python/election.py [URL]     # default: $FENCELOCK_URL, else sqlite:fencelock.db

Each leader writes its feed through a Fence with its term, so a deposed leader that kept running could not overwrite
the next leader's output.
"""

from __future__ import annotations

import sys
import threading
import uuid
from typing import List, Optional

import fencelock


def candidate(client: fencelock.Client, name: str, host: str, terms: List[int]) -> None:
    with client.election(name).campaign(host, ttl=10.0, timeout=30.0) as leadership:
        client.fence(f"{name}-feed").write(leadership.term, f"published by {host}".encode())
        leadership.proclaim(f"{host}, done")
        terms.append(leadership.term)
        print(f"{host}: led in term {leadership.term}")


def main(url: Optional[str]) -> int:
    name = f"example-publisher-{uuid.uuid4().hex[:8]}"  # a fresh election per run
    with fencelock.connect(url) as client, fencelock.connect(url) as watcher:
        observer = watcher.election(name).observe()
        assert observer.get(timeout=10.0) is None, "nobody leads a new election"
        terms: List[int] = []
        threads = [threading.Thread(target=candidate, args=(client, name, f"host-{i}", terms)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(terms) == 3 and terms == sorted(terms), "every new leader has a higher term"
        assert client.election(name).leader() is None, "the last leader resigned"
        token, feed = client.fence(f"{name}-feed").read()
        assert token == terms[-1], (token, terms)
        print(f"the feed holds {feed.decode()!r}, written in term {token}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
