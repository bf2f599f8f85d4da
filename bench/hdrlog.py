"""Percentiles of an HdrHistogram interval log (`sibyl stress -log
hdrfile=FILE`, cassandra-stress's format): every interval histogram, of every
tag unless some are named, added up. Standard library only.

    python3 bench/hdrlog.py FILE [TAG...]     prints p50, p99, p99.9 in ms
"""
import base64
import math
import struct
import sys
import zlib


def _varints(payload):
    """The counts' ZigZag LEB128 varints (at most 9 bytes, the 9th whole)."""
    i, n = 0, len(payload)
    while i < n:
        v, shift = 0, 0
        for k in range(9):
            b = payload[i]
            i += 1
            if k == 8:
                v |= b << shift
                break
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        yield (v >> 1) ^ -(v & 1)


def decode(encoded):
    """(lowest discernible value, significant digits, counts) of one
    base64 V2 histogram, compressed or not."""
    raw = base64.b64decode(encoded)
    cookie, length = struct.unpack(">II", raw[:8])
    if cookie & ~0xF0 == 0x1C849304:  # compressed
        raw = zlib.decompress(raw[8 : 8 + length])
    cookie, length, _offset, digits, lowest, _highest, _ratio = struct.unpack(">IIiIqqd", raw[:40])
    if cookie & ~0xF0 != 0x1C849303:
        raise ValueError(f"not a V2 histogram (cookie {cookie:#x})")
    counts = []
    for v in _varints(raw[40 : 40 + length]):
        if v < 0:
            counts.extend([0] * -v)
        else:
            counts.append(v)
    return lowest, digits, counts


class Merged:
    """Histograms of one layout added up, with HdrHistogram's percentiles."""

    def __init__(self):
        self.layout = None
        self.counts = []

    def add(self, lowest, digits, counts):
        if self.layout is None:
            self.layout = (lowest, digits)
        elif self.layout != (lowest, digits):
            raise ValueError("histograms of different layouts")
        if len(counts) > len(self.counts):
            self.counts.extend([0] * (len(counts) - len(self.counts)))
        for i, c in enumerate(counts):
            self.counts[i] += c

    def total(self):
        return sum(self.counts)

    def value_at_quantile(self, q):
        """The highest value equivalent to the one at quantile q, as the
        Rust and Java implementations answer."""
        lowest, digits = self.layout
        unit = int(math.floor(math.log2(lowest)))
        sub_count_magnitude = int(math.ceil(math.log2(2 * 10**digits)))
        half_magnitude = max(sub_count_magnitude, 1) - 1
        half = 1 << half_magnitude
        target = max(1, math.ceil(min(q, 1.0) * self.total()))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= target:
                bucket = (i >> half_magnitude) - 1
                sub = (i & (half - 1)) + half
                if bucket < 0:
                    sub -= half
                    bucket = 0
                value = sub << (bucket + unit)
                return value + (1 << (bucket + unit)) - 1
        return 0


def read(path, tags=None):
    """The log's intervals added up (only `tags`' when given)."""
    m = Merged()
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith('"'):
                continue
            tag = None
            if line.startswith("Tag="):
                tag, line = line[4:].split(",", 1)
            if tags and tag not in tags:
                continue
            m.add(*decode(line.split(",")[3]))
    return m


if __name__ == "__main__":
    merged = read(sys.argv[1], sys.argv[2:] or None)
    print(" ".join(f"p{q * 100:g}={merged.value_at_quantile(q) / 1000:.3f}ms" for q in (0.5, 0.99, 0.999)))
