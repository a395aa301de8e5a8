#!/usr/bin/env python3
"""tests/dpdk/raw_frames.py — sends malformed Ethernet frames at flurryd's DPDK port.

Run inside the lab namespace (ip netns exec NS ...): frames leave through IFACE (the
namespace end of the veth) with an AF_PACKET socket, addressed to DST_MAC / DST_IP. Each
kind is sent COUNT times; the JSON printed maps each kind to the drop reason flurryd must
count for it (dataplane/frame.h Drop names), so the caller can compare with `flurryctl stats`.

  raw_frames.py --iface flx1 --dst-mac 4e:..:32 --dst-ip 10.77.1.1 --port 7420 [--count 20]
"""
import argparse
import json
import random
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_header(src, dst, proto, payload_len, ihl=5, frag=0x4000, options=b""):
    header = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, ihl * 4 + payload_len, 0x77, frag, 64,
                         proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:]


def udp(src, dst, sport, dport, payload, good_checksum=True):
    length = 8 + len(payload)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, length)
    segment = struct.pack("!HHHH", sport, dport, length, 0) + payload
    value = checksum(pseudo + segment) or 0xFFFF
    if not good_checksum:
        value ^= 0x5A5A
    return segment[:6] + struct.pack("!H", value) + segment[8:]


def get_ids_request(count=1, request_id=1):
    # proto/wire.h: magic "FL", version 1, opcode GET_IDS, flags 0, reserved 0, count, request id
    return struct.pack("!HBBHHIQ", 0x464C, 1, 1, 0, 0, count, request_id)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iface", required=True)
    parser.add_argument("--dst-mac", required=True)
    parser.add_argument("--dst-ip", required=True)
    parser.add_argument("--port", type=int, default=7420)
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()

    with open(f"/sys/class/net/{args.iface}/address") as f:
        src_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    dst_mac = bytes.fromhex(args.dst_mac.replace(":", ""))
    src_ip = None
    # The namespace's address on IFACE: the first IPv4 address the kernel reports for it.
    import fcntl
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifreq = struct.pack("256s", args.iface.encode()[:15])
    src_ip = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, ifreq)[20:24])  # SIOCGIFADDR
    probe.close()
    dst_ip = args.dst_ip
    sport = 40123
    random.seed(7)

    eth_ipv4 = dst_mac + src_mac + b"\x08\x00"
    request = get_ids_request()

    def udp_frame(payload=request, dport=args.port, good_udp=True, frag=0x4000, ihl=5, options=b"",
                  ip_dst=dst_ip, break_ip=False):
        segment = udp(src_ip, ip_dst, sport, dport, payload, good_udp)
        header = ipv4_header(src_ip, ip_dst, 17, len(segment), ihl=ihl, frag=frag, options=options)
        if break_ip:
            header = header[:10] + struct.pack("!H", struct.unpack("!H", header[10:12])[0] ^ 0x1111) + header[12:]
        return eth_ipv4 + header + segment

    kinds = {
        # kind: (frame, expected drop reason)
        "short": (eth_ipv4 + bytes(10), "too_short"),
        "bad_ip_checksum": (udp_frame(break_ip=True), "ip_bad_checksum"),
        "bad_udp_checksum": (udp_frame(good_udp=False), "udp_bad_checksum"),
        "fragment_more": (udp_frame(frag=0x2000), "ip_fragment"),
        "fragment_offset": (udp_frame(frag=0x0008), "ip_fragment"),
        "ip_options": (udp_frame(ihl=6, options=b"\x01\x01\x01\x00"), "ip_options"),
        "wrong_port": (udp_frame(dport=args.port + 1), "udp_wrong_port"),
        # A datagram for us that is not a flurry request: the handler's reason, counted once
        # (request_errors), not a transport drop as well.
        "garbage_payload": (udp_frame(payload=b"\x00\x01" + bytes(random.getrandbits(8) for _ in range(38))),
                            "request:bad_magic"),
        "not_our_ip": (udp_frame(ip_dst="10.77.99.99"), "ip_not_for_us"),
        "tcp": (eth_ipv4 + ipv4_header(src_ip, dst_ip, 6, 20) + bytes(20), "ip_proto_other"),
        "ipv6_ethertype": (dst_mac + src_mac + b"\x86\xdd" + bytes(60), "ether_type_other"),
    }
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((args.iface, 0))
    for _ in range(args.count):
        for frame, _reason in kinds.values():
            sock.send(frame)
    sock.close()
    expected = {}
    for _kind, (_frame, reason) in kinds.items():
        expected[reason] = expected.get(reason, 0) + args.count
    print(json.dumps({"sent": {k: args.count for k in kinds}, "expected_drops": expected}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
