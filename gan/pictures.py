"""Pictures of samples: an image grid, or a scatter plot of 2-D samples over the real data.
Both return HWC uint8 arrays (TensorBoard's add_image takes them) and save as PNG with Pillow."""
import numpy as np
from PIL import Image, ImageDraw

from loops.files import atomic_write


def image_grid(images, columns=0, upscale=0):
    """(N, C, H, W) in [-1, 1] -> one HWC uint8 grid, 2-pixel gaps, square by default (columns 0:
    ceil(sqrt(N))); small images are upscaled (nearest) to at least 64 pixels: 8x8 digits become
    legible at a glance."""
    n, c, h, w = images.shape
    columns = columns or int(np.ceil(np.sqrt(n)))
    upscale = upscale or max(1, 64 // h)
    rows = (n + columns - 1) // columns
    pix = np.clip((images + 1.0) * 127.5, 0, 255).astype(np.uint8)
    pix = pix.repeat(upscale, axis=2).repeat(upscale, axis=3)
    h, w = h * upscale, w * upscale
    grid = np.full((rows * (h + 2) + 2, columns * (w + 2) + 2, c), 255, np.uint8)
    for i in range(n):
        r, k = divmod(i, columns)
        grid[2 + r * (h + 2):2 + r * (h + 2) + h, 2 + k * (w + 2):2 + k * (w + 2) + w] = pix[i].transpose(1, 2, 0)
    return np.repeat(grid, 3, axis=2) if c == 1 else grid


def scatter_plot(samples, centers, extent=5.0, size=320, step=None):
    """Samples (red dots) over the mixture's modes (blue rings) on [-extent, extent]^2, with axes, a
    legend and the step."""
    canvas = np.full((size, size, 3), 255, np.uint8)

    def to_pixels(xy):
        p = (np.asarray(xy) + extent) / (2 * extent) * (size - 1)
        return np.round(p[:, 0]).astype(int), np.round((size - 1) - p[:, 1]).astype(int)

    for tick in range(-int(extent), int(extent) + 1):  # light grid lines at the integers
        px = int(round((tick + extent) / (2 * extent) * (size - 1)))
        canvas[:, px] = canvas[px, :] = (235, 235, 235) if tick else (200, 200, 200)
    cx, cy = to_pixels(centers)
    for dx in range(-4, 5):
        for dy in range(-4, 5):
            if 9 <= dx * dx + dy * dy <= 16:
                canvas[np.clip(cy + dy, 0, size - 1), np.clip(cx + dx, 0, size - 1)] = (40, 90, 220)
    sx, sy = to_pixels(samples)
    keep = (sx >= 0) & (sx < size) & (sy >= 0) & (sy < size)
    canvas[sy[keep], sx[keep]] = (220, 30, 30)
    return frame(canvas, extent, f"{len(samples)} samples (red) vs {len(centers)} modes (blue rings)"
                 + (f", step {step}" if step is not None else ""))


def frame(plot, extent, caption, margin=28):
    """The square plot with axis labels at -extent, 0, extent below and left of it and a caption on top."""
    size = plot.shape[0]
    picture = Image.new("RGB", (size + margin + 8, size + 2 * margin), "white")
    picture.paste(Image.fromarray(plot), (margin, margin))
    draw = ImageDraw.Draw(picture)
    draw.text((margin, 6), caption, fill="black")
    for value in (-extent, 0, extent):
        offset = int(round((value + extent) / (2 * extent) * (size - 1)))
        draw.text((margin + offset - 6, margin + size + 4), f"{value:g}", fill="gray")
        draw.text((2, margin + size - 1 - offset - 5), f"{value:g}", fill="gray")
    return np.asarray(picture)


def save_png(path, hwc_uint8):
    """Write atomically (temp + rename); WriteFailure (loops/files.py) if it cannot be written."""
    picture = Image.fromarray(hwc_uint8)
    atomic_write(path, lambda tmp: picture.save(tmp, format="PNG"), "picture", hwc_uint8.nbytes)
