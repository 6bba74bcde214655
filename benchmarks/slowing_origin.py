"""An HTTP/1.1 origin whose response delay grows over the run: the one such origin of the
tests and the benchmarks (a server degrading during a run, which the validity verdict's trend
checks must flag; docs/trust.md).

It imports only the standard library, so the benchmark scripts import it as
``slowing_origin`` (their own directory is on sys.path) and the tests as
``benchmarks.slowing_origin`` (pytest's ``pythonpath`` puts the repository root on sys.path),
as with ``nginx_origin``.
"""

from __future__ import annotations

import asyncio
import threading
import time


class SlowingOrigin:
    """An HTTP/1.1 origin on 127.0.0.1 (``port``) whose delay grows with time: 0 when it is
    entered, +`per_second` each second after. Every request gets ``200`` with a 2-byte body
    after that delay; connections are kept alive."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self._loop = asyncio.new_event_loop()
        self._start = time.monotonic()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await asyncio.sleep((time.monotonic() - self._start) * self.per_second)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> SlowingOrigin:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._server.close()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()
