"""Hostile summaries and zstd frames made byte by byte (docs/summary-format.md), for the
tests that give `perftracker analyze` more than memory allows (resource_faults.py,
hostile_summaries.py, hostile_archives.py). Python has no zstd: frames are written here
with raw and run-length blocks, which is all a bomb needs (a 128 KiB run is 4 bytes), or
compressed with PT_MAKE_SEEDS (fuzz/make_seeds zstd) where the test has it.

  many_names(n, ..., prefix)         a valid summary naming n distinct functions
                                     (prefix0, prefix1, ... in hex)
  string_bomb(strings, size, rank)   a valid summary whose string table holds `strings`
                                     strings of `size` bytes that no function names
  payload_claim(size)                a summary whose payload is `size` zero bytes (not a
                                     valid payload: read to its end, then refused)
  zstd_frame(parts, window_log)      a zstd frame of raw bytes and runs
"""
import os
import subprocess
import tempfile

SUMMARY_VERSION = 5
BLOCK_MAX = 128 << 10  # a zstd block's content, at most


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v):
    return uvarint(((v << 1) ^ (v >> 63)) & ((1 << 64) - 1))


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b)) + b


def zstd_frame(parts, window_log=23):
    """A zstd frame of parts: bytes (raw blocks) or (byte, count) (run-length blocks). No
    content size, no checksum: its window is 2^window_log, as its descriptor says."""
    out = bytearray((0xFD2FB528).to_bytes(4, "little"))
    out += bytes([0x00, (window_log - 10) << 3])
    blocks = []
    for part in parts:
        if isinstance(part, (bytes, bytearray)):
            blocks += [(0, bytes(part[i:i + BLOCK_MAX]), len(part[i:i + BLOCK_MAX]))
                       for i in range(0, len(part), BLOCK_MAX)]
        else:
            byte, count = part
            while count:
                run = min(count, BLOCK_MAX)
                blocks.append((1, bytes([byte]), run))
                count -= run
    for i, (kind, content, size) in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        out += (last | kind << 1 | size << 3).to_bytes(3, "little") + content
    return bytes(out)


def summary_file(payload_len, frame):
    header = b"PTSUMRY\n" + SUMMARY_VERSION.to_bytes(4, "little") + bytes(4) + payload_len.to_bytes(8, "little")
    return header + frame


def compressed(payload, make_seeds):
    """payload as zstd: make_seeds' (level 3) where there is one, else raw blocks."""
    if not make_seeds:
        return zstd_frame([payload], window_log=17)
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed = os.path.join(tmp, "payload"), os.path.join(tmp, "payload.zst")
        with open(plain, "wb") as f:
            f.write(payload)
        subprocess.run([make_seeds, "zstd", plain, packed], check=True, stdout=subprocess.DEVNULL)
        with open(packed, "rb") as f:
            return f.read()


def head(rank, world, name):
    """A payload's fields before its steps: a worker of a 1 s window with one event."""
    p = varint(rank) + uvarint(0) + varint(rank) + varint(world) + varint(1) + string(name) + string("node0")
    p += string("") * 3 + varint(1) + string("")  # device, backend, producer; device count; software
    p += varint(0) + varint(10 ** 9) + varint(0) * 5 + varint(0) * 5 + varint(0)  # window, busy, exposed, idle
    p += uvarint(1) + varint(0) + varint(-1) + varint(-1) + uvarint(0)  # events, dropped, hw period, hang step, stack
    p += varint(0) + uvarint(0) + uvarint(0)  # stall
    return p + uvarint(0) + uvarint(0)  # no steps, no sync points


def tail():
    """No metrics, no warnings, no hang state."""
    return uvarint(0) + uvarint(0) + varint(-1) + varint(-1) + uvarint(0) + uvarint(0)


def many_names_payload(n, rank=2, world=4, name="node0_2_10002", prefix="k"):
    p = bytearray(head(rank, world, name))
    p += uvarint(n)
    for i in range(n):
        p += string("%s%x" % (prefix, i))
    p += uvarint(n)
    record = varint(1000) * 4 + bytes(24) + varint(0) + uvarint(0) + uvarint(0)  # times, doubles, waiting, steps, caller
    for i in range(n):
        p += uvarint(0) + uvarint(i) + uvarint(0) + uvarint(1) + record  # class, name, group, count
    return bytes(p + tail())


def many_names(n, make_seeds="", rank=2, world=4, name="node0_2_10002", prefix="k"):
    """A valid summary (it passes every rule) of one worker naming n functions."""
    payload = many_names_payload(n, rank, world, name, prefix)
    return summary_file(len(payload), compressed(payload, make_seeds))


def string_bomb(strings, size, rank=2, world=4, name="node0_2_10002"):
    """A valid summary whose string table holds `strings` distinct strings of `size` bytes
    (a run each) that no function names: some KB of file, strings x size decoded."""
    first, last = head(rank, world, name) + uvarint(strings), uvarint(0) + tail()
    parts, length = [first], len(first)
    for i in range(strings):
        tag = b"r%d.s%06d" % (rank, i)  # no two alike, in one summary or another
        parts += [uvarint(size) + tag, (ord("a"), size - len(tag))]
        length += len(uvarint(size)) + size
    parts.append(last)
    return summary_file(length + len(last), zstd_frame(parts))


def payload_claim(size):
    """A summary whose frame yields `size` zero bytes, as its header says: a payload read
    whole before it is found to be no summary."""
    return summary_file(size, zstd_frame([(0, size)]))
