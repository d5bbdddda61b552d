#!/usr/bin/env python3
"""PerfDisplay server: serves this folder at http://127.0.0.1:5000/ with Python's standard
library only, so the report opens on any laptop with no install:

    cd PerfDisplay && python3 app.py            # then open http://127.0.0.1:5000/
    python3 app.py --port 8080 --bind 127.0.0.1

It answers GET and HEAD for files inside this folder (and inside ../raw_trace/, where the
workflow keeps raw traces) and nothing else. The path rules are the same as in
`perftracker display` (src/display/site.c; docs/perfdisplay.md): the path is %-decoded
once; NUL, control bytes, backslashes, encoded slashes, "." / ".." segments and dotfiles
are refused; the file must resolve, symlinks followed, to a regular file inside the folder.
While bound to loopback it refuses requests whose Host is not a loopback name, so another
web site cannot read the report through DNS rebinding. ../raw_trace is served only when it
is a real folder beside this one (a symlink there is ignored).

Pages of other origins cannot read the report either. Every answer, refusals and the
HTTP parser's own included, carries a Content-Type, nosniff and Cross-Origin-Resource-Policy
same-origin: a page on another loopback address or port, or a file:// page, that includes
data.js with <script> (the Host check cannot tell: its request names 127.0.0.1 too) or
fetches report.json gets nothing. Behind that, a request a browser marks as another
origin's (Sec-Fetch-Site cross-site or same-site) is refused unless it navigates here.

Slow clients cannot hold it: a request's head must arrive within REQUEST_DEADLINE_S of the
connection opening (or of the previous answer on a kept-alive connection), a socket idle
for IDLE_TIMEOUT_S is dropped, and once three quarters of MAX_CONNECTIONS are open each new
connection shuts down the oldest one still waiting for its request head.
"""
import argparse
import errno
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

ROOT = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
RAW_TRACE = "raw_trace"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
    ".gz": "application/gzip",
    ".zst": "application/zstd",
}
SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
     "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
     "frame-ancestors 'none'"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
]
LOOPBACK_HOST = re.compile(r"^(127\.0\.0\.1|localhost|\[::1\])(:[0-9]*)?$", re.IGNORECASE)
ERROR_TEXT = {405: "Method Not Allowed: only GET and HEAD"}  # the others: HTTPStatus's phrase


class Refused(Exception):
    def __init__(self, status):
        super().__init__(status)
        self.status = status


REQUEST_DEADLINE_S = 10
IDLE_TIMEOUT_S = 10
MAX_CONNECTIONS = 256
EVICT_AT = MAX_CONNECTIONS * 3 // 4


def sibling_raw_trace(root):
    """The raw_trace/ beside this folder, when the folder has none of its own. It must be a
    real folder inside the round folder: a symlink there (ln -s /etc raw_trace) would
    publish whatever it points to."""
    if os.path.isdir(os.path.join(root, RAW_TRACE)):
        return None
    round_dir = os.path.realpath(os.path.join(root, os.pardir))
    sibling = os.path.join(round_dir, RAW_TRACE)
    if os.path.islink(sibling) or not os.path.isdir(sibling):
        return None
    real = os.path.realpath(sibling)
    return real if real.startswith(round_dir.rstrip(os.sep) + os.sep) else None


def decode_path(path):
    """%-decodes a request path once, refusing NUL, control bytes, backslashes and
    separators hidden in escapes. Works on bytes: file names need not be UTF-8."""
    out = bytearray()
    raw = path.encode("latin-1", "strict") if isinstance(path, str) else path
    i = 0
    while i < len(raw):
        c, escaped = raw[i], False
        if c == 0x25:  # '%'
            pair = raw[i + 1:i + 3]
            if len(pair) != 2 or not all(chr(b) in "0123456789abcdefABCDEF" for b in pair):
                raise Refused(400)
            c, escaped = int(pair, 16), True
            i += 2
        if c < 0x20 or c == 0x7F or c == 0x5C:
            raise Refused(400)
        if c == 0x2F and escaped:
            raise Refused(403)
        out.append(c)
        i += 1
    return bytes(out)


def check_segments(decoded):
    segments = decoded[1:].split(b"/")
    for i, segment in enumerate(segments):
        if not segment and i != len(segments) - 1:
            raise Refused(400)  # "//": an absolute path in disguise
        if segment.startswith(b"."):
            raise Refused(403)  # ".", "..", dotfiles
    return segments


def resolve(root, raw_trace, request_path):
    """Maps a request path (as sent) to the real path of a file inside the folder."""
    if not request_path.startswith("/"):
        raise Refused(400)
    segments = check_segments(decode_path(request_path))
    base = root
    if raw_trace and len(segments) > 1 and segments[0] == RAW_TRACE.encode():
        base, segments = raw_trace, segments[1:]
    if segments[-1] == b"":
        segments[-1] = b"index.html"
    candidate = os.path.join(os.fsencode(base), *segments)
    real = os.path.realpath(candidate)
    if not real.startswith(os.fsencode(base) + os.sep.encode()):
        raise Refused(403)  # a symlink pointing out of the folder
    if not os.path.isfile(real):
        raise Refused(404)
    return real


class Handler(BaseHTTPRequestHandler):
    server_version = "PerfDisplay"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S  # per socket operation (StreamRequestHandler.setup)

    def parse_request(self):
        ok = super().parse_request()  # returns once the whole head has arrived
        if ok and self.request_version == "HTTP/0.9":
            self.send_error(400)  # no headers could go back; libmicrohttpd refuses it too
            return False
        if ok:
            self.server.set_answering(self.connection, True)
        return ok

    def send_error(self, code, message=None, explain=None):
        # The parser's own refusals (a bad request line or version, a head too long) in the
        # same form as ours, with the same headers, instead of the library's bare HTML.
        self.close_connection = True
        self.send_refusal(code)

    def handle_one_request(self):
        super().handle_one_request()
        self.server.set_answering(self.connection, False)  # a kept-alive head is due from now

    def __getattr__(self, name):
        # BaseHTTPRequestHandler dispatches to do_<METHOD>; every method but GET and HEAD
        # gets a 405 instead of the default 501.
        if name.startswith("do_"):
            return lambda: self.send_refusal(405)
        raise AttributeError(name)

    def do_GET(self):
        self.serve(send_body=True)

    def do_HEAD(self):
        self.serve(send_body=False)

    def serve(self, send_body):
        if self.server.loopback_only and not LOOPBACK_HOST.match(self.headers.get("Host", "")):
            return self.send_refusal(403)
        if fetch_is_foreign(self.headers.get("Sec-Fetch-Site", "").strip(),
                            self.headers.get("Sec-Fetch-Mode", "").strip()):
            return self.send_refusal(403)
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        try:
            real = resolve(ROOT, self.server.raw_trace, path)
            f = open(real, "rb")
        except Refused as refusal:
            return self.send_refusal(refusal.status)
        except OSError:
            return self.send_refusal(404)
        with f:
            size = os.fstat(f.fileno()).st_size
            ext = os.path.splitext(real)[1].decode("latin-1").lower()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPES.get(ext, "application/octet-stream"))
            self.send_header("Content-Length", str(size))
            for name, value in SECURITY_HEADERS:
                self.send_header(name, value)
            self.end_headers()
            if send_body:
                shutil.copyfileobj(f, self.wfile, 1 << 20)

    def send_refusal(self, status):
        body = ("%d %s\n" % (status, ERROR_TEXT.get(status) or HTTPStatus(status).phrase)).encode()
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # a status line and headers go back whatever was asked
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if status == 405:
            self.send_header("Allow", "GET, HEAD")
            self.close_connection = True  # the request body, if any, was not read
        for name, value in SECURITY_HEADERS:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class Tracked:
    def __init__(self):
        self.since = time.monotonic()
        self.answering = False
        self.shut = False


class Server(ThreadingMixIn, HTTPServer):
    """Tracks every connection so that slow ones can be shut down (see the docstring)."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_activate(self):
        super().server_activate()
        self.lock = threading.Lock()
        self.connections = {}
        threading.Thread(target=self.watchdog, daemon=True).start()

    def shut(self, sock, tracked):
        if not tracked.shut:
            tracked.shut = True
            try:
                sock.shutdown(socket.SHUT_RDWR)  # its handler sees end-of-file and ends
            except OSError:
                pass

    def watchdog(self):
        while True:
            time.sleep(1)
            now = time.monotonic()
            with self.lock:
                for sock, tracked in self.connections.items():
                    if not tracked.answering and now - tracked.since > REQUEST_DEADLINE_S:
                        self.shut(sock, tracked)

    def set_answering(self, sock, answering):
        with self.lock:
            tracked = self.connections.get(sock)
            if tracked:
                tracked.answering = answering
                tracked.since = time.monotonic()

    def process_request(self, request, client_address):
        with self.lock:
            if len(self.connections) >= EVICT_AT:
                waiting = [(t.since, id(s), s, t) for s, t in self.connections.items()
                           if not t.answering and not t.shut]
                if waiting:
                    _, _, sock, tracked = min(waiting)
                    self.shut(sock, tracked)
            full = len(self.connections) >= MAX_CONNECTIONS
            if not full:
                self.connections[request] = Tracked()
        if full:
            self.shutdown_request(request)  # every slot is busy answering
            return
        super().process_request(request, client_address)

    def close_request(self, request):
        with self.lock:  # forgotten before it closes, so the watchdog never acts on a closed one
            self.connections.pop(request, None)
        super().close_request(request)


def fetch_is_foreign(fetch_site, fetch_mode):
    """Whether a browser says a page of another origin asked for this other than by
    navigating here: a <script>, <img> or fetch() from another loopback address or a file://
    page (cross-site) or another port (same-site). A followed link (navigate) and a client
    without the headers pass. The same rule as pt_display_fetch_is_foreign (site.c)."""
    return fetch_site in ("cross-site", "same-site") and fetch_mode != "navigate"


def is_loopback(address):
    return address == "localhost" or address.startswith("127.") or address == "::1"


def stop(signum, frame):
    raise KeyboardInterrupt  # ends serve_forever() the same way Ctrl-C does


def main():
    parser = argparse.ArgumentParser(description="Serve this PerfDisplay folder.")
    parser.add_argument("--port", type=int, default=5000, help="port (default 5000; 0: any free)")
    parser.add_argument("--bind", default="127.0.0.1",
                        help="address (default 127.0.0.1; 0.0.0.0 exposes the report to the network)")
    args = parser.parse_args()
    bind = "127.0.0.1" if args.bind == "localhost" else args.bind
    Server.address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    try:
        server = Server((bind, args.port), Handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:  # the usual case: another report, or another program, on 5000
            sys.exit("app.py: port %d on %s is taken: another program listens there. Pick another port with "
                     "--port N, e.g. python3 app.py --port %d (--port 0 takes any free one)"
                     % (args.port, bind, args.port + 1 if 0 < args.port < 65535 else 8080))
        sys.exit("app.py: cannot listen on %s port %d: %s" % (bind, args.port, e.strerror))
    server.loopback_only = is_loopback(bind)
    server.raw_trace = sibling_raw_trace(ROOT)
    host = "[%s]" % bind if ":" in bind else bind
    print("PerfDisplay: serving %s at http://%s:%d/ (Ctrl-C to stop)"
          % (ROOT, host, server.server_address[1]), flush=True)
    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
