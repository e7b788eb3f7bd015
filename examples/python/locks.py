"""fencelock from Python: four threads take turns at one lock and guard a shared value with the fencing token.

    python examples/python/locks.py [URL]     # default: $FENCELOCK_URL, else sqlite:fencelock.db

Each critical section writes through a Fence, which rejects any write carrying an older token than one it accepted,
so a holder that paused past its lease could not overwrite a newer holder's value.
"""

from __future__ import annotations

import sys
import threading
from typing import List, Optional

import fencelock


def worker(client: fencelock.Client, worker_id: int, tokens: List[int]) -> None:
    fence = client.fence("example-counter")
    for _ in range(3):
        with client.lock("example-lock", ttl=10.0, timeout=30.0) as lease:
            _, value = fence.read()
            count = int(value or b"0") + 1
            fence.write(lease.fence, str(count).encode())
            tokens.append(lease.fence)
            print(f"worker {worker_id}: token {lease.fence}, count {count}")


def main(url: Optional[str]) -> int:
    with fencelock.connect(url) as client:
        start = client.fence("example-counter").read()[1]
        tokens: List[int] = []
        threads = [threading.Thread(target=worker, args=(client, i, tokens)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _, value = client.fence("example-counter").read()
        assert int(value) == int(start or b"0") + 12, value
        assert tokens == sorted(tokens) and len(set(tokens)) == 12, "tokens rise with every grant"
        # A stale token is rejected.
        try:
            client.fence("example-counter").write(tokens[0], b"stale")
        except fencelock.Fenced as e:
            print(f"stale write rejected: {e.kind.name}")
        else:
            raise AssertionError("a stale write was accepted")
    print("ok: 12 sections, tokens rose, the stale write was fenced")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
