"""Line charts without a plotting library (Pillow only): stacked panels, one per series, as an HWC
uint8 array. Used for the loss curves every run leaves in its run dir (losses.png) and for any
other series a script wants to draw."""
import numpy as np
from PIL import Image, ImageDraw

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
          (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


def panels(title, rows, width=720, height=150):
    """rows: [(label, x of shape (N,), y of shape (N,) or (N, k))]: one panel per row, k lines each,
    the y range and the x range written at the panel's edges."""
    canvas = Image.new("RGB", (width, 24 + len(rows) * (height + 10)), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((8, 6), title, fill="black")
    left, right = 60, width - 10
    for r, (label, x, y) in enumerate(rows):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64).reshape(len(x), -1)
        top = 24 + r * (height + 10)
        bottom = top + height - 14
        finite = y[np.isfinite(y)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if hi - lo < 1e-12:
            lo, hi = lo - 1, hi + 1
        draw.rectangle([left, top, right, bottom], outline=(180, 180, 180))
        draw.text((4, top), f"{hi:.3g}", fill="gray")
        draw.text((4, bottom - 10), f"{lo:.3g}", fill="gray")
        x_lo, x_hi = (float(x.min()), float(x.max())) if len(x) else (0.0, 1.0)
        draw.text((left + 4, bottom + 1), f"{label} ({x_lo:g} .. {x_hi:g})", fill="black")
        xs = left + (x - x_lo) / max(x_hi - x_lo, 1e-12) * (right - left)
        for k in range(y.shape[1]):
            ys = bottom - (np.clip(y[:, k], lo, hi) - lo) / (hi - lo) * (bottom - top)
            points = [(a, b) for a, b, ok in zip(xs.tolist(), ys.tolist(), np.isfinite(y[:, k])) if ok]
            if len(points) > 1:
                draw.line(points, fill=COLORS[k % len(COLORS)], width=2)
            elif points:
                draw.ellipse([points[0][0] - 2, points[0][1] - 2, points[0][0] + 2, points[0][1] + 2],
                             fill=COLORS[k % len(COLORS)])
    return np.asarray(canvas)
