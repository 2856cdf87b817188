"""A small hand-rolled SVG writer: one horizontal stacked bar per runner, one colour per stage."""

from __future__ import annotations

from typing import List, Tuple
from xml.sax.saxutils import escape

PALETTE = ["#8c8c8c", "#e15759", "#f28e2b", "#4e79a7", "#b07aa1", "#59a14f", "#76b7b2", "#edc948", "#bab0ac"]


def _nice_step(span: float) -> float:
    """A 1/2/5 x 10^k tick step giving 4-8 ticks over span."""
    import math
    if span <= 0:
        return 1.0
    raw = span / 6
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def stacked_bars(title: str, unit: str, stages: List[str], rows: List[Tuple[str, List[float]]]) -> str:
    """rows: (label, one value per stage, in unit). Returns the SVG document."""
    label_w, bar_h, gap, left_pad, top = 230, 26, 14, 10, 60
    plot_w = 620
    legend_h = 22 * ((len(stages) + 3) // 4)
    height = top + len(rows) * (bar_h + gap) + 40 + legend_h
    width = label_w + plot_w + 60
    vmax = max([sum(v) for _, v in rows] + [1e-9])
    step = _nice_step(vmax)
    ticks = [0.0]
    while ticks[-1] < vmax:  # the last tick is at or beyond the longest bar
        ticks.append(round(ticks[-1] + step, 10))
    axis_max = ticks[-1] if ticks[-1] > 0 else 1
    sx = plot_w / axis_max
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left_pad}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>']
    y_axis_bottom = top + len(rows) * (bar_h + gap)
    for tv in ticks:
        x = label_w + tv * sx
        out.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{y_axis_bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{y_axis_bottom + 14}" text-anchor="middle" fill="#555">{tv:g}</text>')
    out.append(f'<text x="{label_w + plot_w / 2:.1f}" y="{y_axis_bottom + 30}" text-anchor="middle" fill="#555">{escape(unit)}</text>')
    for i, (label, vals) in enumerate(rows):
        y = top + i * (bar_h + gap)
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h * 0.68:.1f}" text-anchor="end">{escape(label)}</text>')
        x = label_w
        for j, v in enumerate(vals):
            if v <= 0:
                continue
            w = v * sx
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{PALETTE[j % len(PALETTE)]}">'
                       f'<title>{escape(label)}: {escape(stages[j])} {v:.3g} {escape(unit)}</title></rect>')
            x += w
        out.append(f'<text x="{x + 6:.1f}" y="{y + bar_h * 0.68:.1f}" fill="#333">{sum(vals):.3g}</text>')
    ly = y_axis_bottom + 48
    for j, s in enumerate(stages):
        lx = left_pad + (j % 4) * 210
        yy = ly + (j // 4) * 22
        out.append(f'<rect x="{lx}" y="{yy}" width="14" height="14" fill="{PALETTE[j % len(PALETTE)]}"/>')
        out.append(f'<text x="{lx + 20}" y="{yy + 11}">{escape(s)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
