#!/usr/bin/env python3
"""The hypervisor's steal on the receive cores against whether a run lost, as an SVG strip chart.

Reads a CSV with the columns kind (pipeline, loops, or loops_busy: the loops beside a CPU loop on
every spare core), receive_steal (a share of the receive cores' time over the send, from
lanes-steal.txt) and lost (0 for a lossless run), as docs/figures/steal_16_lanes.csv holds for
16-lane runs on the 4-GPU host, and writes one row of dots per group: the pipeline runs that
lost, those that did not, the bare loops, and the bare loops beside busy cores.

    python3 scripts/plot_steal.py docs/figures/steal_16_lanes.csv docs/figures/steal_16_lanes.svg
"""
import csv
import sys

WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, ROW = 190, 30, 40, 50
GROUPS = [("pipeline, lost", "#c0392b"), ("pipeline, lossless", "#2e86c1"), ("bare loops, lossless", "#7f8c8d"),
          ("loops beside busy cores", "#8e44ad")]


def group_of(row):
    if row["kind"] == "loops":
        return 2
    if row["kind"] == "loops_busy":
        return 3
    return 0 if int(row["lost"]) != 0 else 1


def main(source, target):
    rows = list(csv.DictReader(open(source)))
    if not rows:
        sys.exit(f"plot_steal: {source} has no runs")
    most = max(float(r["receive_steal"]) for r in rows)
    top = max(0.05, -(-most * 100 // 5) * 5 / 100)  # the axis ends at the next 5%
    x = lambda share: LEFT + share / top * (WIDTH - LEFT - RIGHT)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">'
             "16 lanes on a 4-GPU host: the receive cores' time the hypervisor stole, per run</text>"]
    for index, (label, colour) in enumerate(GROUPS):
        y = TOP + ROW * index + ROW / 2
        members = [r for r in rows if group_of(r) == index]
        parts.append(f'<text x="{LEFT - 10}" y="{y + 4}" text-anchor="end">{label} ({len(members)})</text>')
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#eee"/>')
        for k, row in enumerate(members):
            jitter = (k % 5 - 2) * 4  # runs with the same steal stay apart
            parts.append(f'<circle cx="{x(float(row["receive_steal"])):.1f}" cy="{y + jitter}" r="4" '
                         f'fill="{colour}" fill-opacity="0.75"><title>machine {row["machine"]} {row["run"]}: '
                         f'{float(row["receive_steal"]):.1%}</title></circle>')
    axis = TOP + ROW * len(GROUPS) + 10
    parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis}" y2="{axis}" stroke="black"/>')
    for tick in range(0, int(round(top * 100)) + 1, 5):
        parts.append(f'<line x1="{x(tick / 100)}" x2="{x(tick / 100)}" y1="{axis}" y2="{axis + 5}" stroke="black"/>')
        parts.append(f'<text x="{x(tick / 100)}" y="{axis + 18}" text-anchor="middle">{tick}%</text>')
    parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{axis + 36}" text-anchor="middle">'
                 "steal on the receive cores (mean over the send, /proc/stat)</text>")
    parts.append("</svg>")
    with open(target, "w") as out:
        out.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_steal.py RUNS.csv PICTURE.svg")
    main(sys.argv[1], sys.argv[2])
