#!/usr/bin/env python3
"""http_test.py -- the PerfDisplay servers' HTTP contract, over raw sockets (so no client
library normalises the paths we send).

    http_test.py --server app.py|perftracker --perftracker BIN --work DIR [--python PY]

Checks, for the server named: files and content types, HEAD, security headers, 405 for
every method but GET/HEAD, refusal of every traversal form (/../, %2e%2e, %2f, %5c, NUL,
absolute-form and "//" paths, dotfiles, symlinks to a file and to a folder outside),
Host checking, the ../raw_trace mapping, loopback-only binding, and a clean stop on SIGTERM.
Against pages of other origins (run_cross_origin): every kind of answer -- files, HEAD,
400, 403, 404, 405, and the HTTP parser's own refusals (HTTP/0.9, a bad version, a head too
long) -- carries Cross-Origin-Resource-Policy: same-origin, nosniff and its Content-Type;
what a browser marks as another origin's request (Sec-Fetch-Site cross-site/same-site) is
refused unless it navigates. (browser.test.js --check cross-origin shows the effect in
Chromium.)
Then two attacks on a second server: a round whose raw_trace beside PerfDisplay is a symlink
to /etc (nothing of /etc may be served), and a slowloris -- SLOW_CLIENTS sockets that each
send a request head one byte every TRICKLE_S seconds -- during which a legitimate request
must still be answered, and after which the server must have closed every slow socket
(the bounds are generous: the servers promise 10 s, a blocked one takes forever).
"""
import argparse
import os
import signal
import shutil
import socket
import sys
import threading
import time
import urllib.parse

import fixture

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def send(base, raw, read_body=True):
    """Sends raw bytes as one request; returns (status, headers, body)."""
    u = urllib.parse.urlsplit(base)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0].split() if lines else []
    # 0: no status line (an answer of bare body bytes, or none)
    status = int(first[1]) if len(first) > 1 and first[0].startswith("HTTP/") and first[1].isdigit() else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def get(base, path, method="GET", host=None, body=b"", extra=b""):
    u = urllib.parse.urlsplit(base)
    host = host if host is not None else "127.0.0.1:%d" % u.port
    raw = (b"%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (method.encode(), path, host.encode()))
    if body:
        raw += b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n" % len(body)
    return send(base, raw + extra + b"\r\n" + body)


def local_non_loopback_address():
    """An address of this machine other than loopback (None when there is none)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; it only picks a route
            addr = s.getsockname()[0]
            return None if addr.startswith("127.") else addr
    except OSError:
        return None


def plant_escapes(display_dir):
    """Files a traversal would reach: a secret beside the folder, and symlinks out of it."""
    secret = os.path.join(os.path.dirname(display_dir), "secret.txt")
    with open(secret, "w") as f:
        f.write("TOP-SECRET\n")
    os.symlink(secret, os.path.join(display_dir, "leak.txt"))
    os.symlink(os.path.dirname(display_dir), os.path.join(display_dir, "up"))
    with open(os.path.join(display_dir, ".hidden"), "w") as f:
        f.write("TOP-SECRET\n")


def run(base, display_dir, facts):
    status, h, body = get(base, b"/")
    check(status == 200 and h.get("content-type", "").startswith("text/html") and b"<title>" in body,
          "GET / serves index.html as text/html")
    check(h.get("x-content-type-options") == "nosniff" and "script-src 'self'" in h.get("content-security-policy", ""),
          "security headers (nosniff, CSP) are sent")
    status, h, body = get(base, b"/data.js")
    check(status == 200 and h.get("content-type", "").startswith("text/javascript") and body.startswith(b"/*")
          and b"window.PT_REPORT" in body, "GET /data.js is JavaScript holding the report")
    check(b"<img" not in body, "data.js escapes '<' in report strings (no raw markup in the script)")
    status, h, body = get(base, b"/report.json")
    check(status == 200 and h.get("content-type") == "application/json", "report.json is application/json")
    status, h, body = get(base, b"/assets/style.css")
    check(status == 200 and h.get("content-type", "").startswith("text/css"), "CSS content type")
    size = os.path.getsize(os.path.join(display_dir, "assets", "app.js"))
    status, h, body = get(base, b"/assets/app.js", method="HEAD")
    check(status == 200 and h.get("content-length") == str(size) and body == b"",
          "HEAD: headers with the file's length, no body")
    status, _, _ = get(base, b"/assets/app.js?v=1#frag")
    check(status == 200, "a query string is ignored")
    status, h, body = get(base, b"/no-such-file.js")
    check(status == 404, "missing file: 404")
    # Each refusal's body says its status in words, as text (both servers alike).
    check(body == b"404 Not Found\n" and h.get("content-type") == "text/plain; charset=utf-8",
          "404's body is '404 Not Found' (%r)" % body[:60])
    status, _, body = get(base, b"/leak.txt")
    check(status == 403 and body == b"403 Forbidden\n", "403's body is '403 Forbidden' (%r)" % body[:60])
    status, _, body = get(base, b"/%zz")
    check(status == 400 and body == b"400 Bad Request\n", "400's body is '400 Bad Request' (%d %r)" % (status, body[:60]))
    status, _, body = get(base, b"/", method="DELETE")
    check(status == 405 and body == b"405 Method Not Allowed: only GET and HEAD\n",
          "405's body names the methods (%r)" % body[:60])
    status, _, _ = get(base, b"/assets/")
    check(status == 404, "a folder without index.html: 404 (no listings)")

    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"):
        status, h, _ = get(base, b"/", method=method, body=b"a=1" if method in ("POST", "PUT") else b"")
        check(status == 405 and h.get("allow") == "GET, HEAD", "%s /: 405 with Allow: GET, HEAD" % method)

    traversals = [b"/../secret.txt", b"/../../../../etc/passwd", b"/assets/../../secret.txt",
                  b"/%2e%2e/secret.txt", b"/%2E%2E/%2e%2e/etc/passwd", b"/.%2e/secret.txt",
                  b"/assets/..%2f..%2fsecret.txt", b"/%2e%2e%2fsecret.txt", b"/..%5csecret.txt",
                  b"/assets%2fapp.js", b"/index.html%00.js", b"//etc/passwd", b"/%2fetc/passwd",
                  b"/leak.txt", b"/up/secret.txt", b"/.hidden",
                  b"/raw_trace/../secret.txt", b"/raw_trace/%2e%2e/secret.txt", b"/%252e%252e/secret.txt",
                  b"http://127.0.0.1/../secret.txt", b"/%", b"/%zz"]
    for path in traversals:
        status, _, body = get(base, path)
        check(status in (400, 403, 404) and b"TOP-SECRET" not in body and b"root:" not in body,
              "refused: %s -> %d" % (path.decode(), status))
    status, _, _ = get(base, b"/leak.txt")
    check(status == 403, "symlink to a file outside: 403")
    status, _, _ = get(base, b"/up/secret.txt")
    check(status == 403, "path through a symlink to a folder outside: 403")
    status, _, _ = get(base, b"/%2e%2e/secret.txt")
    check(status == 403, "%2e%2e: 403")

    status, _, _ = get(base, b"/", host="evil.example:5000")
    check(status == 403, "a foreign Host header (DNS rebinding) is refused")
    status, _, _ = get(base, b"/", host="localhost:%d" % urllib.parse.urlsplit(base).port)
    check(status == 200, "Host: localhost is accepted")

    for path in facts["raw_traces"]:
        status, _, body = get(base, b"/" + path.encode())
        check(status == 200 and body == fixture.RAW_TRACE_CONTENT, "raw trace served from ../raw_trace: " + path)

    u = urllib.parse.urlsplit(base)
    check(u.hostname == "127.0.0.1", "binds 127.0.0.1 by default (URL printed: %s)" % base)
    other = local_non_loopback_address()
    if other:
        try:
            socket.create_connection((other, u.port), timeout=2).close()
            reachable = True
        except OSError:
            reachable = False
        check(not reachable, "not reachable on %s (another address of this machine)" % other)
    else:
        print("skip not reachable from other addresses: this machine has only loopback")


TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
SCRIPT = "text/javascript; charset=utf-8"


def guarded(headers, content_type):
    """Whether an answer carries what keeps it unreadable from other origins."""
    return (headers.get("cross-origin-resource-policy") == "same-origin"
            and headers.get("x-content-type-options") == "nosniff"
            and headers.get("content-type") == content_type
            and "access-control-allow-origin" not in headers)


def holds_no_report(body):
    return b"PT_REPORT" not in body and b"report_version" not in body


def run_cross_origin(base, server, facts):
    port = urllib.parse.urlsplit(base).port
    host = b"Host: 127.0.0.1:%d\r\n" % port
    # Every kind of answer the server makes itself, with the Content-Type each must carry.
    answers = [
        ("GET /", get(base, b"/"), 200, HTML),
        ("GET /data.js", get(base, b"/data.js"), 200, SCRIPT),
        ("GET /report.json", get(base, b"/report.json"), 200, "application/json"),
        ("GET /assets/style.css", get(base, b"/assets/style.css"), 200, "text/css; charset=utf-8"),
        ("GET /README.txt", get(base, b"/README.txt"), 200, TEXT),
        ("GET /app.py", get(base, b"/app.py"), 200, TEXT),
        ("HEAD /data.js", get(base, b"/data.js", method="HEAD"), 200, SCRIPT),
        ("404", get(base, b"/no-such-file.js"), 404, TEXT),
        ("HEAD 404", get(base, b"/no-such-file.js", method="HEAD"), 404, TEXT),
        ("403 (symlink out)", get(base, b"/leak.txt"), 403, TEXT),
        ("403 (dotfile)", get(base, b"/.hidden"), 403, TEXT),
        ("403 (foreign Host)", get(base, b"/data.js", host="evil.example"), 403, TEXT),
        ("403 (no Host)", send(base, b"GET /data.js HTTP/1.0\r\n\r\n"), 403, TEXT),
        ("400 (bad escape)", get(base, b"/%zz"), 400, TEXT),
        ("400 (NUL)", get(base, b"/data.js%00"), 400, TEXT),
        ("405 (POST)", get(base, b"/data.js", method="POST", body=b"a=1"), 405, TEXT),
        ("405 (OPTIONS)", get(base, b"/data.js", method="OPTIONS"), 405, TEXT),
    ]
    for path in facts["raw_traces"][:1]:
        answers.append(("GET /" + path, get(base, b"/" + path.encode()), 200, "application/octet-stream"))
    for what, (status, h, _), want_status, content_type in answers:
        check(status == want_status and guarded(h, content_type),
              "%s: %d with CORP same-origin, nosniff, %s (%d, %r, %r, %r)" % (
                  what, want_status, content_type, status, h.get("cross-origin-resource-policy"),
                  h.get("x-content-type-options"), h.get("content-type")))

    # Requests the HTTP parser refuses before any handler sees them. app.py answers them in
    # its own form; libmicrohttpd answers with its own fixed sentence (no hook reaches it),
    # which holds nothing of the report.
    parser_refusals = [
        ("HTTP/0.9 request", b"GET /data.js\r\n\r\n", 400),
        ("HTTP/2.0 request line", b"GET /data.js HTTP/2.0\r\n" + host + b"\r\n", 505),
        ("request line of 70 KB", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n" + host + b"\r\n", 414),
        ("header of 70 KB", b"GET /data.js HTTP/1.1\r\n" + host + b"X: " + b"a" * 70000 + b"\r\n\r\n", 431),
    ]
    for what, raw, want_status in parser_refusals:
        status, h, body = send(base, raw)
        if server == "app.py":
            check(status == want_status and guarded(h, TEXT) and body.startswith(b"%d " % want_status),
                  "%s: %d in app.py's own form, CORP same-origin, nosniff, text (%d, %r, %r)"
                  % (what, want_status, status, h, body[:40]))
        else:
            check(status == want_status and holds_no_report(body) and "access-control-allow-origin" not in h,
                  "%s: libmicrohttpd's own %d, its fixed sentence without the report (%d, %r)"
                  % (what, want_status, status, body[:60]))

    # What a browser marks as a page of another origin asking (Sec-Fetch-Site cross-site:
    # another address or a file:// page; same-site: another port) is refused unless it is
    # a navigation; the page's own requests, a typed URL and a followed link are answered.
    def fetched(path, site, mode, method="GET"):
        extra = b"".join(b"%s: %s\r\n" % (k, v.encode()) for k, v in
                         ((b"Sec-Fetch-Site", site), (b"Sec-Fetch-Mode", mode)) if v is not None)
        return get(base, path, method=method, extra=extra)
    paths = [b"/data.js", b"/report.json", b"/assets/app.js", b"/"]
    paths += [b"/" + p.encode() for p in facts["raw_traces"][:1]]
    foreign = (("cross-site", "no-cors"), ("same-site", "no-cors"), ("cross-site", "cors"), ("cross-site", None))
    own = (("same-origin", "no-cors"), ("none", "navigate"), ("cross-site", "navigate"), ("same-site", "navigate"))
    for path in paths:
        for site, mode in foreign:
            status, h, body = fetched(path, site, mode)
            check(status == 403 and guarded(h, TEXT) and body == b"403 Forbidden\n",
                  "%s with Sec-Fetch-Site %s, Mode %s: 403, no data (%d, %r)"
                  % (path.decode(), site, mode, status, body[:40]))
        for site, mode in own:
            status, h, _ = fetched(path, site, mode)
            check(status == 200 and "cross-origin-resource-policy" in h,
                  "%s with Sec-Fetch-Site %s, Mode %s: 200 (%d)" % (path.decode(), site, mode, status))
    status, h, body = fetched(b"/data.js", "cross-site", "no-cors", method="HEAD")
    check(status == 403 and body == b"" and guarded(h, TEXT), "HEAD /data.js from another site: 403 (%d)" % status)


SLOW_CLIENTS = 140      # more than the 128 slots the servers had
TRICKLE_S = 2           # well inside any idle timeout: only a deadline stops them
LEGIT_TIMEOUT_S = 15    # a blocked server made a request wait 60 s and more
CLOSED_WITHIN_S = 45    # the servers' deadline is 10 s


def symlinked_raw_trace_round(work, display_dir):
    """A round folder whose raw_trace/ beside PerfDisplay is `ln -s /etc raw_trace`."""
    round_dir = os.path.join(work, "symlinked-raw-trace-round")
    shutil.rmtree(round_dir, ignore_errors=True)
    os.makedirs(round_dir)
    shutil.copytree(display_dir, os.path.join(round_dir, "PerfDisplay"), symlinks=True)
    os.symlink("/etc", os.path.join(round_dir, "raw_trace"))
    return os.path.join(round_dir, "PerfDisplay")


def run_symlinked_raw_trace(base):
    for path in (b"/raw_trace/passwd", b"/raw_trace/hostname", b"/raw_trace/os-release", b"/raw_trace/"):
        status, _, body = get(base, path)
        check(status in (403, 404) and b"root:" not in body,
              "raw_trace -> /etc beside PerfDisplay: %s refused (%d)" % (path.decode(), status))
    status, _, body = get(base, b"/")
    check(status == 200 and b"<title>" in body, "the folder itself is still served")


def trickle(sockets, stop):
    """Sends the next byte of a request head on every socket every TRICKLE_S seconds."""
    head = b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 4096
    i = 1
    while not stop.wait(TRICKLE_S):
        for s in sockets:
            try:
                s.send(head[i:i + 1])
            except OSError:
                pass
        i = min(i + 1, len(head) - 1)


def run_slowloris(base):
    u = urllib.parse.urlsplit(base)
    slow = []
    for _ in range(SLOW_CLIENTS):
        s = socket.create_connection((u.hostname, u.port), timeout=10)
        s.send(b"G")
        slow.append(s)
    stop = threading.Event()
    feeder = threading.Thread(target=trickle, args=(slow, stop), daemon=True)
    feeder.start()
    try:
        time.sleep(1)  # let the server take them all in
        started = time.monotonic()
        try:
            with socket.create_connection((u.hostname, u.port), timeout=LEGIT_TIMEOUT_S) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % u.port)
                answer = s.recv(64)
        except OSError as e:
            answer = ("%s" % e).encode()
        took = time.monotonic() - started
        check(answer.startswith(b"HTTP/1.1 200"),
              "a legitimate request during a slowloris of %d sockets is answered (%.1f s): %r"
              % (SLOW_CLIENTS, took, answer[:40]))
        deadline = time.monotonic() + CLOSED_WITHIN_S
        open_ones = list(slow)
        while open_ones and time.monotonic() < deadline:
            still = []
            for s in open_ones:
                s.settimeout(0)
                try:
                    if s.recv(4096) == b"":
                        continue  # closed by the server
                    continue  # it answered something (an error): that is an end too
                except BlockingIOError:
                    still.append(s)
                except OSError:
                    continue  # reset by the server
            open_ones = still
            time.sleep(0.5)
        check(not open_ones, "the server closed every slow socket within %d s (%d of %d still open)"
              % (CLOSED_WITHIN_S, len(open_ones), SLOW_CLIENTS))
    finally:
        stop.set()
        feeder.join()
        for s in slow:
            s.close()


def attack_server(a, display_dir):
    """A second server, on a round with a symlinked raw_trace: both attacks."""
    proc, base = fixture.start_server(a.server, symlinked_raw_trace_round(a.work, display_dir), a.perftracker,
                                      a.python)
    try:
        run_symlinked_raw_trace(base)
        run_slowloris(base)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except Exception:
            proc.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", choices=("app.py", "perftracker"), required=True)
    p.add_argument("--perftracker", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--work", required=True)
    a = p.parse_args()
    if a.server == "app.py" and not os.access(a.python, os.X_OK):
        print("SKIP: %s not found (app.py is tested with it)" % a.python)
        return fixture.SKIP
    display_dir, facts = fixture.prepare(a.work, a.perftracker, source="generated")
    plant_escapes(display_dir)
    proc, base = fixture.start_server(a.server, display_dir, a.perftracker, a.python)
    kept = None
    try:
        run(base, display_dir, facts)
        run_cross_origin(base, a.server, facts)
        # A browser's kept-alive connection, open as the server is stopped: closing it must
        # not hold the exit up (its closed-notification takes the server's lock).
        u = urllib.parse.urlsplit(base)
        kept = socket.create_connection((u.hostname, u.port), timeout=30)
        kept.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: keep-alive\r\n\r\n" % u.port)
        check(kept.recv(4096).startswith(b"HTTP/1.1 200"), "a kept-alive connection is answered")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)  # a bound on a hang, not a timing measurement
        except Exception:
            proc.kill()
            rc = None
        if kept:
            kept.close()
    check(rc == 0, "stops cleanly on SIGTERM with a connection open (exit status %s)" % rc)
    attack_server(a, display_dir)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
