#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
# A flame graph as one self-contained SVG, from folded stacks (a Counter of
# "root;caller;...;leaf" -> samples): every frame is a box as wide as the
# samples it was on the stack for, its callers below it, with its name, its
# share and its samples in a tooltip. No scripts, no external fonts: any
# browser shows it, GitHub renders it in place. Usage as a program:
#   flamegraph.py TITLE < folded > out.svg   (lines "a;b;c COUNT")
import collections
import html
import sys
import zlib

WIDTH = 1200
ROW = 17
PAD = 10
TOP = 48
MIN_PX = 0.2


def _tree(folded):
    """The call tree: node = [samples, {child name: node}]."""
    root = [0, {}]
    for stack, n in folded.items():
        root[0] += n
        node = root
        for f in stack.split(";"):
            node = node[1].setdefault(f, [0, {}])
            node[0] += n
    return root


def _depth(node):
    return 1 + max((_depth(c) for c in node[1].values()), default=0)


def _colour(name):
    """Warm hues, stable per name; one hue family per part of the system."""
    h = zlib.crc32(name.encode())
    if name.startswith("rroce:"):
        r, g, b = 230, 120 + h % 80, 40 + (h >> 8) % 40
    elif name.startswith("host:"):
        r, g, b = 120 + h % 60, 160 + (h >> 8) % 60, 200 + (h >> 16) % 50
    elif name.startswith("uml:"):
        r, g, b = 200 + h % 55, 90 + (h >> 8) % 90, 60 + (h >> 16) % 40
    else:
        r, g, b = 170 + h % 60, 170 + (h >> 8) % 60, 110 + (h >> 16) % 40
    return f"rgb({r},{g},{b})"


def svg(folded, title, subtitle=""):
    """The flame graph of `folded` as SVG text."""
    root = _tree(folded)
    total = root[0] or 1
    depth = _depth(root) - 1
    height = TOP + depth * ROW + 2 * PAD
    scale = (WIDTH - 2 * PAD) / total
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="#fdfdf6"/>',
        f'<text x="{WIDTH // 2}" y="20" text-anchor="middle" font-size="15">'
        f"{html.escape(title)}</text>",
        f'<text x="{WIDTH // 2}" y="36" text-anchor="middle" fill="#555">'
        f"{html.escape(subtitle)}</text>",
    ]

    def walk(node, x, level):
        # Children widest first (the order carries no meaning, as in every
        # flame graph; this one puts the big boxes on the left).
        for name, child in sorted(node[1].items(), key=lambda kv: (-kv[1][0], kv[0])):
            w = child[0] * scale
            if w >= MIN_PX:
                y = height - PAD - (level + 1) * ROW
                share = 100.0 * child[0] / total
                tip = html.escape(f"{name} ({child[0]} samples, {share:.2f}%)")
                out.append(
                    f'<g><title>{tip}</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" '
                    f'height="{ROW - 1}" fill="{_colour(name)}" rx="2"/>'
                )
                chars = int((w - 4) / 6.6)
                if chars >= 3:
                    label = name if len(name) <= chars else name[: chars - 2] + ".."
                    out.append(
                        f'<text x="{x + 2:.2f}" y="{y + ROW - 5}">{html.escape(label)}</text>'
                    )
                out.append("</g>")
                walk(child, x, level + 1)
            x += w

    walk(root, PAD, 0)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    folded = collections.Counter()
    for line in sys.stdin:
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if stack and n.isdigit():
            folded[stack] += int(n)
    sys.stdout.write(svg(folded, sys.argv[1] if len(sys.argv) > 1 else "flame graph"))


if __name__ == "__main__":
    main()
