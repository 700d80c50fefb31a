"""The page's two charts as inline SVG: no script, no fonts or images fetched, readable when printed.

Every label goes through `html.escape` (partition values are user data). Each bar carries its
figure in `data-value` and a `<title>` (the browser's tooltip), so the chart can be checked by
parsing the page and read without hovering.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from jobs.report.figures import size_text

SMALL_COLOUR = "#e8a33d"
OTHER_COLOUR = "#3d7be8"


def size_histogram(buckets: Sequence[tuple[str, int, bool]], width: int = 420, height: int = 180) -> str:
    """Vertical bars of (label, files, small) per size bucket; small buckets in the warning colour."""
    top, bottom, left = 18, 34, 8
    slot = (width - 2 * left) / max(len(buckets), 1)
    tallest = max((count for _label, count, _small in buckets), default=0) or 1
    parts = [
        f'<svg class="chart histogram" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'role="img" aria-label="live files by size">'
    ]
    for index, (label, count, small) in enumerate(buckets):
        bar = (height - top - bottom) * count / tallest
        x = left + index * slot + slot * 0.15
        y = height - bottom - bar
        colour = SMALL_COLOUR if small else OTHER_COLOUR
        parts.append(
            f'<rect data-bucket="{escape(label)}" data-value="{count}" x="{x:.1f}" y="{y:.1f}" '
            f'width="{slot * 0.7:.1f}" height="{max(bar, 0.5):.1f}" fill="{colour}">'
            f"<title>{escape(label)}: {count:,} files</title></rect>"
        )
        centre = left + index * slot + slot / 2
        parts.append(f'<text x="{centre:.1f}" y="{y - 4:.1f}" class="count">{count:,}</text>')
        parts.append(f'<text x="{centre:.1f}" y="{height - bottom + 16:.1f}">{escape(label)}</text>')
    parts.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - left}" y2="{height - bottom}" class="axis"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def partition_bars(rows: Sequence[tuple[str, int, int, int]], width: int = 420) -> str:
    """Horizontal bars of (partition, files, small files, bytes), small files stacked first."""
    row_height, label_width, right = 22, 150, 60
    height = row_height * len(rows) + 8
    widest = max((files for _name, files, _small, _bytes in rows), default=0) or 1
    scale = (width - label_width - right) / widest
    parts = [
        f'<svg class="chart partitions" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'role="img" aria-label="files per partition">'
    ]
    for index, (name, files, small, size) in enumerate(rows):
        y = 4 + index * row_height
        label = name or "(unpartitioned)"
        shown = label if len(label) <= 22 else label[:21] + "…"
        parts.append(
            f'<text x="{label_width - 6}" y="{y + 15}" class="label">{escape(shown)}<title>{escape(label)}'
            "</title></text>"
        )
        small_width, other_width = small * scale, (files - small) * scale
        parts.append(
            f'<rect x="{label_width}" y="{y + 3}" width="{small_width:.1f}" height="{row_height - 8}" '
            f'fill="{SMALL_COLOUR}"><title>{escape(label)}: {small:,} small files</title></rect>'
        )
        parts.append(
            f'<rect x="{label_width + small_width:.1f}" y="{y + 3}" width="{other_width:.1f}" '
            f'height="{row_height - 8}" fill="{OTHER_COLOUR}"><title>{escape(label)}: {files:,} files, '
            f"{escape(size_text(size))}</title></rect>"
        )
        parts.append(
            f'<text x="{label_width + small_width + other_width + 4:.1f}" y="{y + 15}" class="count after">'
            f"{files:,}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
