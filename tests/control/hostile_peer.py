"""A hostile peer on a job's coordinator port, for the attack scenarios of
test_multiprocess.py: the control plane's wire format (src/control/protocol.h) and its
handshake (src/control/auth.c), written again from the documentation in Python, so an
attack is a real process speaking to a real job over loopback.

    frame := u32 body_len | u8 type | fields (little endian; bytes = u32 len + bytes)
    key   := HMAC-SHA256(secret, "perftracker/v1/" + label)   label "agent" or "control"
    proof := HMAC-SHA256(key, "pt-ctl-v1 " + "client" + role + server_nonce + client_nonce)
"""
import hashlib
import hmac
import os
import socket
import struct

CHALLENGE, AUTH, WELCOME, REFUSED = 1, 2, 3, 4
JOIN, HEARTBEAT, SUMMARY, AUTO_REQUEST = 10, 11, 13, 15
TRIGGER = 30
ROUND_STARTED, PROGRESS, ERROR = 40, 41, 45
ROLE_AGENT, ROLE_CONTROL = 1, 2
AUTO_SLOWDOWN = 1
NAMES = {CHALLENGE: "challenge", AUTH: "auth", WELCOME: "welcome", REFUSED: "refused", ROUND_STARTED: "round-started",
         PROGRESS: "progress", ERROR: "error"}


def derive(secret, label):
    return hmac.new(secret, b"perftracker/v1/" + label.encode(), hashlib.sha256).digest()


def agent_key_from_secret(secret):
    """The agent key of a job run with PERFTRACKER_SECRET=secret."""
    return derive(secret.encode(), "agent")


def old_derived_agent_key(host, port, world_size, run_id=""):
    """The agent key perftracker used to derive from public facts (auth.c before issue 15):
    the coordinator's address and port (in /proc/net/tcp), the world size, the run id."""
    identity = ("%s|%d|%d|%s" % (host, port, world_size, run_id)).encode()
    return derive(identity, "agent-from-environment")


def control_key_from_file(path):
    with open(path) as f:
        return bytes.fromhex(f.read().strip())


def frame(kind, body=b""):
    return struct.pack("<IB", len(body) + 1, kind) + body


def blob(data):
    return struct.pack("<I", len(data)) + data


def join_body(rank, world_size, host=b"intruder", pid=4242):
    """A JOIN; its connection fields (uid, pid as a relay saw them) say unknown."""
    return struct.pack("<iiiiq", rank, 0, world_size, 0, pid) + blob(host) + struct.pack("<qq", -1, -1)


def heartbeat_body(steps_done, mean_ns=20_000_000, stalled_ns=0):
    return struct.pack("<Iqqq", 0, steps_done, mean_ns, stalled_ns)


def auto_request_body(steps_done=100):
    return struct.pack("<Bqqqq", AUTO_SLOWDOWN, steps_done, 30_000_000, 20_000_000, 0)


def trigger_body(wait=1, steps=2, timeout_ms=0, save_raw=0, path=b""):
    return struct.pack("<iiBq", wait, steps, save_raw, timeout_ms) + blob(path)


class Peer:
    """One connection to the coordinator, read frame by frame."""

    def __init__(self, port, host="127.0.0.1", timeout=30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def send(self, kind, body=b""):
        self.sock.sendall(frame(kind, body))

    def recv(self):
        """(type, body) of the next frame, or (None, b"") once the coordinator closed."""
        while True:
            if len(self.buf) >= 4:
                (length,) = struct.unpack_from("<I", self.buf)
                if len(self.buf) >= 4 + length:
                    body = self.buf[4:4 + length]
                    self.buf = self.buf[4 + length:]
                    return body[0], body[1:]
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                return None, b""
            self.buf += chunk

    def authenticate(self, key, role):
        """The handshake; returns the coordinator's answer: WELCOME, or REFUSED and why."""
        kind, body = self.recv()
        assert kind == CHALLENGE, "the coordinator did not send a challenge (got %s)" % kind
        version, server_nonce = struct.unpack("<I", body[:4])[0], body[4:36]
        client_nonce = os.urandom(32)
        mac = hmac.new(key, b"pt-ctl-v1 client" + bytes([role]) + server_nonce + client_nonce,
                       hashlib.sha256).digest()
        self.send(AUTH, struct.pack("<IB", version, role) + client_nonce + mac)
        return self.recv()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def text_of(body):
    """The text of a REFUSED or ERROR frame."""
    (length,) = struct.unpack_from("<I", body)
    return body[4:4 + length].decode(errors="replace")
