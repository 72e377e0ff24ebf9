"""A webhook receiver for the push-notification checks: an HTTP server on 127.0.0.1 that answers
200 to every POST and keeps its headers (lower-cased) and JSON body."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    def __init__(self):
        self.posts = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with outer.lock:
                    outer.posts.append(({k.lower(): v for k, v in self.headers.items()}, json.loads(body or b"null")))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    async def wait_for(self, done, timeout=20.0):
        """The posts once `done(headers, body)` holds for one of them, else None after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            with self.lock:
                posts = list(self.posts)
            if any(done(h, b) for h, b in posts):
                return posts
            await asyncio.sleep(0.05)
        return None
