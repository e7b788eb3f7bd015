"""fencelock with asyncio: tasks take turns at one lock; a waiter that gives up (asyncio timeout) leaves nothing behind.

    python examples/python/locks_async.py [URL]
"""

from __future__ import annotations

import asyncio
import sys
from typing import List, Optional

import fencelock
import fencelock.aio


async def worker(client: fencelock.aio.Client, worker_id: int, tokens: List[int]) -> None:
    for _ in range(3):
        async with await client.lock("example-async-lock", ttl=10.0, timeout=30.0) as lease:
            tokens.append(lease.fence)
            print(f"task {worker_id}: token {lease.fence}")
            await asyncio.sleep(0.005)


async def main(url: Optional[str]) -> int:
    async with await fencelock.aio.connect(url) as client:
        tokens: List[int] = []
        await asyncio.gather(*(worker(client, i, tokens) for i in range(4)))
        assert tokens == sorted(tokens) and len(set(tokens)) == 12

        async with client.mutex("example-async-lock"):
            # Another task (another owner: this one would re-enter) gives up waiting; cancelling removes its attempt.
            try:
                await asyncio.wait_for(asyncio.create_task(client.lock("example-async-lock")), 0.2)
            except asyncio.TimeoutError:
                print("the impatient task gave up")
        info = await client.inspect("example-async-lock")
        assert info.holder is None, info
    print("ok: 12 sections in 4 tasks, tokens rose, nothing left held")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None)))
