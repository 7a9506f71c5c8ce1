#!/usr/bin/env python3
"""Counts the AArch64 instructions a program executes under qemu-user, and shows the hot loops.

Debian's qemu-user has no TCG plugins, so the count comes from qemu's own logs:
`-d in_asm,exec,nochain` prints every translated block once (its instructions, "IN:") and one
"Trace" line each time a block runs (`nochain` stops qemu from jumping block to block without
logging). Instructions executed = sum over Trace lines of the size of the block at that pc.

    tools/arm64_count.py [--cpu MODEL] [--top N] [--json OUT] -- PROGRAM ARGS...

runs PROGRAM through cmake/qemu-aarch64.sh's loader (the log streams through a FIFO, never to
disk: a decode token is millions of blocks) and prints the total, then the N blocks with the
most executed instructions, each with its share, its MACs per instruction where it is an
integer / bf16 / f32 multiply loop, and its listing. The listing of the hottest block of a
matmul *is* the kernel's inner loop as it ran: that is where the per-1,000-MAC figures come
from.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOADER = "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1"
LIBS = "/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu"

# Multiply-accumulates one instruction does, by mnemonic and arrangement (128-bit vectors).
# sdot/udot: 4 lanes x 4 int8 products; smmla/ummla/usmmla: 2x8 by 8x2 -> 2x2 = 32;
# bfmmla: 2x4 by 4x2 = 16; bfdot: 4 lanes x 2 = 8; fmla .4s 4, .8h 8; smlal/smlal2 .8h->.4s 4
# (int16 x int16), .8b->.8h 8; sadalp is an add, not counted.
MACS = {
    "sdot": 16, "udot": 16, "usdot": 16, "sudot": 16,
    "smmla": 32, "ummla": 32, "usmmla": 32,
    "bfmmla": 16, "bfdot": 8,
}


# Instructions qemu 7.2's disassembler does not know (it prints ".byte"): the dot product and
# matrix multiply extensions, and half-precision FMLA / FMLS (FEAT_FP16: vector and by element).
# (mask, value, mnemonic); bit 30 (Q) picks 128 or 64 bits.
ENCODINGS = (
    (0xbfe0fc00, 0x0e809400, "sdot"), (0xbfe0fc00, 0x2e809400, "udot"),
    (0xbfc0f400, 0x0f80e000, "sdot"), (0xbfc0f400, 0x2f80e000, "udot"),
    (0xbfe0fc00, 0x0e809c00, "usdot"), (0xbfc0f400, 0x0f80f000, "usdot"),
    (0xbfc0f400, 0x0f00f000, "sudot"),
    (0xffe0fc00, 0x4e80a400, "smmla"), (0xffe0fc00, 0x6e80a400, "ummla"),
    (0xffe0fc00, 0x4e80ac00, "usmmla"), (0xffe0fc00, 0x6e40ec00, "bfmmla"),
    (0xbfe0fc00, 0x2e40fc00, "bfdot"), (0xbfc0f400, 0x0f40f000, "bfdot"),
    (0xbfe0fc00, 0x0e400c00, "fmla.h"), (0xbfe0fc00, 0x0ec00c00, "fmls.h"),
    (0xbfc0f400, 0x0f001000, "fmla.h"), (0xbfc0f400, 0x0f005000, "fmls.h"),
)


def decode_word(word):
    """(mnemonic, operands) of an instruction qemu printed as .byte, or None."""
    for mask, value, name in ENCODINGS:
        if word & mask == value:
            if name.endswith(".h"):  # half-precision lanes: 8 or 4
                return name[:-2], "v.8h (decoded)" if word & (1 << 30) else "v.4h (decoded)"
            return name, "v.4s (decoded)" if word & (1 << 30) else "v.2s (decoded)"
    return None


def macs_of(mnemonic, operands):
    if mnemonic in MACS:
        return MACS[mnemonic] // (2 if ".2s" in operands and "decoded" in operands else 1)
    if mnemonic in ("fmla", "fmls"):
        if ".4s" in operands:
            return 4
        if ".8h" in operands:
            return 8
        if ".4h" in operands:
            return 4
        if ".2d" in operands:
            return 2
        if ".2s" in operands:
            return 2
        return 1
    if mnemonic in ("smlal", "smlal2", "umlal", "umlal2", "smull", "smull2"):
        first = operands.split(",")[0]
        return 8 if ".8h" in first else 4 if ".4s" in first else 2
    if mnemonic in ("fmadd", "fmsub", "madd", "msub"):
        return 1
    return 0


SIMD_OPERAND = re.compile(r"\bv\d+\.|\b[qdsh]\d+\b")


def is_simd(mnemonic, operands):
    if mnemonic in MACS or operands.endswith("(decoded)"):
        return True
    if mnemonic.startswith(("ld", "st", "prfm")):
        return False
    return bool(SIMD_OPERAND.search(operands))


INSN = re.compile(r"^0x([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*(.*)$")


class Counter:
    def __init__(self):
        self.size = {}  # block pc -> instructions
        self.text = {}  # block pc -> [(mnemonic, operands)]
        self.runs = collections.Counter()  # block pc -> executions
        self.lines = 0

    def feed(self, stream):
        block = None
        runs = collections.Counter()  # keyed by the Trace line's pc text: no parsing per line
        for line in stream:
            if line[0] == "T":
                runs[line.split("/", 2)[1]] += 1
                block = None
                continue
            self.lines += 1
            if line.startswith("IN:"):
                block = []
                continue
            if block is not None:
                m = INSN.match(line)
                if m:
                    mnemonic, operands = m.group(3), m.group(4).strip()
                    if mnemonic == ".byte":
                        mnemonic, operands = decode_word(int(m.group(2), 16)) or (
                            mnemonic, operands)
                    block.append((int(m.group(1), 16), mnemonic, operands))
                elif not line.strip() and block:
                    self.size[block[0][0]] = len(block)
                    self.text[block[0][0]] = block
                    block = None
        for pc, n in runs.items():
            self.runs[int(pc, 16)] += n
        self.lines += sum(runs.values())

    def total(self):
        return sum(n * self.size.get(pc, 0) for pc, n in self.runs.items())

    def simd(self):
        """Instructions that issue to the FP / Advanced SIMD pipes (a vector or FP register
        operand, loads and stores excluded): the bound of a core with few such pipes."""
        per_block = {pc: sum(1 for _, m, o in b if is_simd(m, o)) for pc, b in self.text.items()}
        return sum(n * per_block.get(pc, 0) for pc, n in self.runs.items())

    def unknown(self):
        return sum(n for pc, n in self.runs.items() if pc not in self.size)


def run(args):
    cpu = args.cpu or os.environ.get("EDGEVL_QEMU_CPU", "max")
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "log")
        os.mkfifo(fifo)
        counter = Counter()

        def reader():
            with open(fifo, "r", errors="replace") as f:
                counter.feed(f)

        t = threading.Thread(target=reader)
        t.start()
        cmd = ["qemu-aarch64", "-cpu", cpu, "-d", "in_asm,exec,nochain", "-D", fifo, LOADER,
               "--library-path", LIBS] + args.program
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL if args.quiet else None)
        t.join()
        if proc.returncode != 0:
            sys.exit(f"arm64_count: the program exited with {proc.returncode}")
    return counter


def report(counter, top, cpu):
    total = counter.total()
    print(f"cpu {cpu}: {total:,} instructions executed, {counter.simd():,} of them FP/SIMD "
          f"({counter.lines:,} log lines; "
          f"{counter.unknown():,} block runs without a listing)")
    hot = sorted(counter.runs.items(), key=lambda kv: -kv[1] * counter.size.get(kv[0], 0))
    out = []
    for pc, n in hot[:top]:
        block = counter.text.get(pc, [])
        insns = len(block)
        macs = sum(macs_of(m, o) for _, m, o in block)
        share = n * insns / total if total else 0
        per_k = 1000.0 * insns / macs if macs else None
        print(f"\n== block 0x{pc:x}: {insns} instructions x {n:,} runs = {share:.1%} of all"
              + (f"; {macs} MACs a run, {per_k:.1f} instructions per 1,000 MACs" if macs else ""))
        for _, m, o in block:
            print(f"    {m:8s} {o}")
        out.append({"pc": pc, "instructions": insns, "runs": n, "share": share, "macs": macs,
                    "per_1000_macs": per_k, "listing": [f"{m} {o}" for _, m, o in block]})
    return {"total": total, "simd": counter.simd(), "hot": out}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", help="qemu CPU model (default EDGEVL_QEMU_CPU or max)")
    p.add_argument("--top", type=int, default=5, help="hot blocks to list")
    p.add_argument("--json", help="write the total and the hot blocks here")
    p.add_argument("--quiet", action="store_true", help="drop the program's standard output")
    p.add_argument("program", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.program and args.program[0] == "--":
        args.program = args.program[1:]
    if not args.program:
        p.error("no program to run")
    counter = run(args)
    result = report(counter, args.top, args.cpu or os.environ.get("EDGEVL_QEMU_CPU", "max"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
