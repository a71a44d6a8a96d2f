#!/usr/bin/env python3
"""Reads nccl-tests tables for scripts/compare-ompi.sh.

  compare-ompi.py check FILE...
      Exits 1, saying why, unless every FILE is a complete table (rows and
      the "Out of bounds values" footer) with #wrong 0 in every half.

  compare-ompi.py report --dir DIR --configs shm2,tcp2 --colls all_reduce
                         --tools ompi,cc[,ccB] --reps 3
      Prints, per configuration and collective, the median over the
      repetitions of each size's out-of-place time and busbw for every tool,
      and the ratios to Open MPI; then one matrix of ratios per tool, out of
      place, and the same matrices in place (MPI_IN_PLACE for Open MPI).
      DIR holds CONFIG.COLL.TOOL.REP.out (REP from 1).

Tables are parsed as every nccl-tests parser does: '#' lines are comments;
a row is whitespace-separated: size count type redop root, then time algbw
busbw #wrong out of place, then the same in place.

Ratios are "how many times faster cc is": Open MPI's time / cc's time, which
for the same bytes and bus factor is also cc's busbw / Open MPI's busbw. It is
computed from the time column, which keeps its digits at sizes whose busbw
prints as 0.00. At or above 1, cc is as fast or faster.
"""
import argparse
import functools
import os
import statistics
import sys

CONFIG_TITLES = {
    "shm2": "shm np=2",
    "shm4": "shm np=4",
    "tcp2": "TCP loopback np=2",
}
COLL_SHORT = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag"}
TOOL_NAMES = {"ompi": "ompi", "cc": "cc", "ccB": "cc-B"}


class TableError(Exception):
    pass


@functools.lru_cache(maxsize=None)  # report reads each table for both halves
def parse(path):
    """Returns ({size: (time_us, busbw) out of place + (time_us, busbw) in
    place}, [wrong counts], oob)."""
    rows, wrongs, oob = {}, [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if s.startswith("#"):
                key, _, val = s[1:].partition(":")
                if key.strip() == "Out of bounds values":
                    oob = int(val.split()[0])
                continue
            fields = s.split()
            if not fields or not fields[0].isdigit():
                continue  # blank, or a launcher's message on stdout
            halves = split_row(fields)
            if halves is None:
                raise TableError(f"{path}:{n}: not an nccl-tests row ({len(fields)} fields): {s!r}")
            try:
                rows[int(fields[0])] = tuple(float(h[i]) for h in halves for i in (0, 2))
                for h in halves:
                    if h[3] != "N/A":
                        wrongs.append((n, float(h[3])))
            except ValueError:
                raise TableError(f"{path}:{n}: bad number in row: {s!r}") from None
    return rows, wrongs, oob


def split_row(fields):
    """Returns a row's out-of-place and in-place halves, each starting with
    time algbw busbw #wrong, or None. A row is size count type redop root
    (redop is empty for hypercube), two halves of 4 fields (8 with -I's
    per-iteration columns), and with -S a date and a time."""
    if len(fields) >= 2 and fields[-2].count("-") == 2 and fields[-1].count(":") == 2:
        fields = fields[:-2]
    for half in (4, 8):
        if len(fields) - 2 * half in (4, 5):
            body = fields[len(fields) - 2 * half:]
            return body[:half], body[half:]
    return None


def check(paths):
    bad = []
    for p in paths:
        try:
            rows, wrongs, oob = parse(p)
        except (OSError, TableError) as e:
            bad.append(str(e))
            continue
        if not rows:
            bad.append(f"{p}: no rows")
        elif oob is None:
            bad.append(f"{p}: no 'Out of bounds values' line: the run did not finish")
        for n, w in wrongs:
            if w != 0:
                bad.append(f"{p}:{n}: #wrong is {w:g}")
        if oob:
            bad.append(f"{p}: Out of bounds values: {oob}")
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


def ratio(num, den):
    if num is None or den is None or den <= 0 or num <= 0:
        return "-"
    r = num / den
    if r >= 100:
        return f"{r:.0f}"
    if r >= 10:
        return f"{r:.1f}"
    return f"{r:.2f}"


def medians(d, config, coll, tool, reps, half=0):
    """Returns {size: (median time, median busbw)} over the repetitions, out
    of place (half 0) or in place (half 1)."""
    runs = []
    for rep in range(1, reps + 1):
        rows, _, _ = parse(os.path.join(d, f"{config}.{coll}.{tool}.{rep}.out"))
        runs.append(rows)
    sizes = sorted(runs[0])
    for i, r in enumerate(runs[1:], 2):
        if sorted(r) != sizes:
            raise TableError(f"{config} {coll} {tool}: repetition {i} has other sizes than repetition 1")
    i = 2 * half
    return {s: (statistics.median(r[s][i] for r in runs), statistics.median(r[s][i + 1] for r in runs)) for s in sizes}


def latency_size(sizes):
    """The smallest size that moves data: 8 B for all_reduce; for
    reduce_scatter and all_gather the first row above 0 (nccl-tests rounds a
    rank's block down to 16 bytes, so 8 B prints as 0)."""
    moving = [s for s in sizes if s > 0]
    return moving[0] if moving else None


def table(config, coll, med, tools, reps, out):
    ompi = med["ompi"]
    sizes = sorted(ompi)
    for t in tools[1:]:
        if sorted(med[t]) != sizes:
            raise TableError(f"{config} {coll}: {t} printed other sizes than Open MPI")
    title = f"{CONFIG_TITLES.get(config, config)} - {coll}"
    print(f"## {title} (out-of-place, median of {reps})", file=out)
    head = f"{'size (B)':>12}"
    for t in tools:
        name = TOOL_NAMES[t]
        head += f"  {name + ' us':>10}  {name + ' GB/s':>10}"
    for t in tools[1:]:
        head += f"  {TOOL_NAMES[t] + '/ompi':>9}"
    if "ccB" in tools:
        head += f"  {'cc-B/cc':>9}"
    print(head, file=out)
    for s in sizes:
        line = f"{s:>12}"
        for t in tools:
            us, bw = med[t][s]
            line += f"  {us:>10.2f}  {bw:>10.2f}"
        for t in tools[1:]:
            line += f"  {ratio(ompi[s][0], med[t][s][0]) if s else '-':>9}"
        if "ccB" in tools:
            line += f"  {ratio(med['cc'][s][0], med['ccB'][s][0]) if s else '-':>9}"
        print(line, file=out)
    ls = latency_size(sizes)
    if ls is not None:
        parts = [f"{TOOL_NAMES[t]} {med[t][ls][0]:.2f} us" for t in tools]
        ratios = [f"ompi/{TOOL_NAMES[t]} {ratio(ompi[ls][0], med[t][ls][0])}" for t in tools[1:]]
        print(f"latency at {ls} B: {', '.join(parts)}; time ratio {', '.join(ratios)}", file=out)
    print(file=out)


def matrix(title, cols, num, den, out):
    """One ratio per size and (config, coll): num's busbw / den's."""
    sizes = sorted({s for c in cols for s in c[2][den]})
    print(f"## {title}", file=out)
    print(f"{'size (B)':>12}" + "".join(f"  {c[0] + ' ' + COLL_SHORT.get(c[1], c[1]):>8}" for c in cols), file=out)
    for s in sizes:
        line = f"{s:>12}"
        for _, _, med in cols:
            a, b = med[num].get(s), med[den].get(s)
            line += f"  {ratio(b[0], a[0]) if a and b and s else '-':>8}"
        print(line, file=out)
    print(file=out)


def report(args, out=sys.stdout):
    tools = args.tools.split(",")
    if tools[0] != "ompi" or not set(tools) <= set(TOOL_NAMES):
        raise TableError(f"--tools {args.tools}: want ompi,cc or ompi,cc,ccB")
    cols, cols_ip = [], []
    for config in args.configs.split(","):
        for coll in args.colls.split(","):
            med = {t: medians(args.dir, config, coll, t, args.reps) for t in tools}
            table(config, coll, med, tools, args.reps, out)
            cols.append((config, coll, med))
            cols_ip.append((config, coll, {t: medians(args.dir, config, coll, t, args.reps, 1) for t in tools}))
    ratio_note = "busbw ratio = time ratio, >= 1: as fast or faster"
    for place, cs in (("", cols), (", in place", cols_ip)):
        matrix(f"cc / Open MPI{place} ({ratio_note}; median of {args.reps})", cs, "cc", "ompi", out)
        if "ccB" in tools:
            matrix(f"cc-B / Open MPI{place} ({ratio_note})", cs, "ccB", "ompi", out)
            matrix(f"cc-B / cc{place} (>= 1: cc-B as fast or faster)", cs, "ccB", "cc", out)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("files", nargs="+")
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--configs", required=True)
    r.add_argument("--colls", required=True)
    r.add_argument("--tools", required=True)
    r.add_argument("--reps", type=int, required=True)
    args = p.parse_args(argv)
    if args.cmd == "check":
        return check(args.files)
    try:
        report(args)
    except (OSError, TableError) as e:
        print(f"compare-ompi.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
