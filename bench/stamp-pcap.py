#!/usr/bin/env python3
"""Reads a pcap (nanosecond or microsecond) of STAMP traffic on one link end
and says, per probe, what the wire saw: probes never answered (lost on the
wire or never reflected) and replies the reflector held in userspace longer
than a threshold (its own t3 - t2, t2 being the reflector's kernel RX
timestamp). Written to tell a lost probe from a late reflector.
Usage: stamp-pcap.py FILE.pcap [PORT=8620] [THRESHOLD_MS=5]"""
import struct
import sys

NTP_UNIX = 2208988800


def packets(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    scale = 1e9 if magic == 0xA1B23C4D else 1e6
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack("<IIII", data[off : off + 16])
        off += 16
        yield sec + frac / scale, data[off : off + caplen]
        off += caplen


def ntp(b):
    sec, frac = struct.unpack(">II", b)
    return sec - NTP_UNIX + frac / 2**32


def main():
    path = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8620
    threshold = float(sys.argv[3]) / 1e3 if len(sys.argv) > 3 else 0.005
    probes, replied, late = {}, set(), 0
    for t, p in packets(path):
        if len(p) < 34 or struct.unpack(">H", p[12:14])[0] != 0x0800:
            continue
        ip = p[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            continue
        sport, dport = struct.unpack(">HH", ip[ihl : ihl + 4])
        u = ip[ihl + 8 :]
        src = ".".join(map(str, ip[12:16]))
        if len(u) < 44:
            continue
        if dport == port:
            seq = struct.unpack(">I", u[0:4])[0]
            probes[(src, sport, seq)] = t
        elif sport == port:
            dst = ".".join(map(str, ip[16:20]))
            t3, t2 = ntp(u[4:12]), ntp(u[16:24])
            sseq = struct.unpack(">I", u[24:28])[0]
            replied.add((dst, dport, sseq))
            if t3 - t2 > threshold:
                late += 1
                print(f"{t:.6f} late reply {src}:{port} -> {dst}:{dport} seq {sseq}: "
                      f"held {1e3 * (t3 - t2):.1f} ms by the reflector (t2 {t2:.6f})")
    lost = sorted((t, k) for k, t in probes.items() if k not in replied)
    for t, (src, sport, seq) in lost:
        print(f"{t:.6f} probe {src}:{sport} seq {seq}: no reply on the wire")
    print(f"{path}: {len(probes)} probes, {len(lost)} unanswered on the wire, "
          f"{late} replies held over {threshold * 1e3:.0f} ms by a reflector")


if __name__ == "__main__":
    main()
