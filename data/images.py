"""File-based image datasets, read through mindspore.dataset:

  mnist, fashion-mnist  the IDX files as distributed, gzip (train-images-idx3-ubyte.gz,
                        train-labels-idx1-ubyte.gz) or uncompressed, whichever --data-dir holds
                        (uncompressed first when both are there); training uses the train split
  cifar10               the standard binary batches (data_batch_1.bin ... data_batch_5.bin)
  folder                PNG/JPEG images, either one subfolder per class or all in one folder

IDX files: `read_idx(data_dir, split)` ("train" or "test", the t10k-* files) parses either format
with gzip + numpy, the same code for both, so both give identical arrays, and nothing is ever
written to the data dir. It checks everything MindSpore's MnistDataset would only fail on deep in
its pipeline ("Exception thrown from dataset pipeline"): a bad gzip stream, the magic numbers (2051
images, 2049 labels), counts that agree, byte counts that match the headers, images between 4x4 and
512x512, at least one image, and labels in [0, 9] (a conditional GAN must not train on class 255).
Any of these is one UserError line naming the file. `load` then resizes the arrays in a
mindspore.dataset.GeneratorDataset pipeline (MnistDataset reads uncompressed files only); the
image-to-image recipes take held-out images from `read_idx(dir, "test")`.

Without --data-dir, `default_data_dir(dataset)` is used: for fashion-mnist Debian's
dataset-fashion-mnist package directory (DEFAULT_DATA_DIRS) when it exists; otherwise the error
says where to get the files.

The pipeline (decode, resize, center-crop, HWC -> CHW) runs once, in mindspore.dataset's parallel
workers, into a uint8 array held in memory (MNIST: 47 MB, CIFAR-10: 154 MB); batches are then
drawn by host indices (data/arrays.py). That keeps the order a pure function of the seed (exact
resume) and the step never waits on data: a batch costs one fancy-index and a cast (bench/).
Before reading, each directory is checked, so a missing or malformed file gives one line naming it.
"""
import contextlib
import gzip
import os
import struct
import zlib

import numpy as np

from data.arrays import ArraySource
from loops.config import UserError

IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
IDX_SIDES = (4, 512)  # smallest and largest image side accepted from an IDX header
IDX_CLASSES = 10
READ_CHUNK = 1 << 24
IDX_CHUNK = 1000
CIFAR_RECORD = 1 + 32 * 32 * 3
CIFAR_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")
NATIVE_SIZE = {"mnist": 28, "fashion-mnist": 28, "cifar10": 32, "folder": 32}
# Where a dataset is when --data-dir is not given (only if the directory exists). Read at call
# time, so tests can point it elsewhere.
DEFAULT_DATA_DIRS = {"fashion-mnist": "/usr/share/datasets/fashion-mnist"}


def default_data_dir(dataset):
    """The directory used when --data-dir is empty: DEFAULT_DATA_DIRS[dataset] if it exists, else ""."""
    path = DEFAULT_DATA_DIRS.get(dataset, "")
    return path if path and os.path.isdir(path) else ""


def where_to_get(dataset):
    """Where the files of a dataset come from, for the 'needs --data-dir' line ("" if nothing to say)."""
    if dataset == "fashion-mnist":
        return ("the gzip IDX files from https://github.com/zalandoresearch/fashion-mnist, or on Debian/Ubuntu "
                "`apt-get install dataset-fashion-mnist`, which puts them in "
                f"{DEFAULT_DATA_DIRS['fashion-mnist']}")
    if dataset == "mnist":
        return ("the IDX files, gzip or uncompressed, from http://yann.lecun.com/exdb/mnist/; "
                "`python -m data.export_idx DIR` writes sklearn's 8x8 digits in that format")
    return ""


def _require_dir(data_dir, dataset):
    if not data_dir:
        where = where_to_get(dataset)
        raise UserError(f"--dataset {dataset} needs --data-dir" + (f" ({where})" if where else ""))
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} is not a directory")


def _idx_found(data_dir, name):
    """data_dir/name if it is there (no decompression needed), else data_dir/name.gz, else None."""
    for path in (os.path.join(data_dir, name), os.path.join(data_dir, name + ".gz")):
        if os.path.isfile(path):
            return path
    return None


def _idx_path(data_dir, name):
    """_idx_found, or one line naming the missing file."""
    path = _idx_found(data_dir, name)
    if path:
        return path
    raise UserError(f"missing {os.path.join(data_dir, name)}.gz (or uncompressed {name}): "
                    "the standard IDX file")


@contextlib.contextmanager
def _idx_stream(path):
    """path opened for reading, decompressed if .gz; a failed read becomes one line naming the file."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            yield f
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:  # truncated, corrupt, or not gzip at all
        raise UserError(f"{path} is not a valid gzip file ({str(e).strip() or type(e).__name__})")
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror or e})")


def _idx_header(f, path, magic, ndim, kind):
    """The ndim sizes after the magic number, which must be `magic`."""
    head = f.read(4 + 4 * ndim)
    if len(head) < 4 + 4 * ndim or int.from_bytes(head[:4], "big") != magic:
        raise UserError(f"{path} is not an IDX {kind} file (bad header)")
    return struct.unpack(f">{ndim}I", head[4:])


def _idx_body(f, path, nbytes, what):
    """Exactly the nbytes the header announces. Read in chunks: a lying header must not make us
    allocate its size (BufferedReader.read(n) does), and one byte more tells padding apart."""
    data = bytearray()
    while len(data) <= nbytes:
        chunk = f.read(min(READ_CHUNK, nbytes + 1 - len(data)))
        if not chunk:
            break
        data += chunk
    if len(data) < nbytes:
        raise UserError(f"{path} is truncated: its header announces {what} ({nbytes} bytes), "
                        f"the file holds {len(data)}")
    if len(data) > nbytes:
        raise UserError(f"{path} is padded: more bytes follow the {what} ({nbytes} bytes) its header announces")
    return np.frombuffer(data, np.uint8)


def _read_idx_images(path):
    with _idx_stream(path) as f:
        n, rows, cols = _idx_header(f, path, 2051, 3, "image")
        lo, hi = IDX_SIDES
        if not (lo <= rows <= hi and lo <= cols <= hi):  # also keeps rows * cols from overflowing
            raise UserError(f"{path} holds {rows}x{cols} images; expected between {lo}x{lo} and {hi}x{hi}")
        if n == 0:
            raise UserError(f"{path} holds 0 images")
        return _idx_body(f, path, n * rows * cols, f"{n} images of {rows}x{cols}").reshape(n, rows, cols)


def _read_idx_labels(path, n, images_path):
    with _idx_stream(path) as f:
        (count,) = _idx_header(f, path, 2049, 1, "label")
        if count != n:
            raise UserError(f"{path} holds {count} labels, but {images_path} holds {n} images")
        labels = _idx_body(f, path, n, f"{n} labels")
    if labels.max() >= IDX_CLASSES:  # else a conditional GAN silently trains on class 255
        raise UserError(f"labels must be in [0, {IDX_CLASSES - 1}], found {labels.max()} in {path}")
    return labels.astype(np.int32)


def read_idx(data_dir, split="train"):
    """(uint8 images (N, rows, cols), int32 labels (N,)) of one split ("train", or "test" for the
    t10k-* files) of an MNIST-format directory, gzip or uncompressed; UserError names a bad file."""
    if split not in IDX_FILES:
        raise ValueError(f"split must be one of {sorted(IDX_FILES)}, got {split!r}")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} is not a directory")
    images_path, labels_path = (_idx_path(data_dir, name) for name in IDX_FILES[split])
    images = _read_idx_images(images_path)
    return images, _read_idx_labels(labels_path, len(images), images_path)


def check_cifar(data_dir):
    _require_dir(data_dir, "cifar10")
    present = [name for name in CIFAR_FILES if os.path.isfile(os.path.join(data_dir, name))]
    if not present:
        raise UserError(f"--dataset cifar10: missing {os.path.join(data_dir, CIFAR_FILES[0])} "
                        "(the binary version, data_batch_1.bin ... data_batch_5.bin)")
    for name in present:
        size = os.path.getsize(os.path.join(data_dir, name))
        if size != 10000 * CIFAR_RECORD:
            raise UserError(f"{os.path.join(data_dir, name)} has {size} bytes, expected 10000 records "
                            f"of {CIFAR_RECORD} bytes ({10000 * CIFAR_RECORD})")


def folder_classes(data_dir):
    """[(class name, [image paths])]: subfolders as classes, or the folder itself as one class."""
    _require_dir(data_dir, "folder")

    def images_in(d):
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(IMAGE_EXTENSIONS))
    subdirs = sorted(d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))
    classes = [(d, images_in(os.path.join(data_dir, d))) for d in subdirs]
    classes = [(d, files) for d, files in classes if files]
    if not classes:
        classes = [(os.path.basename(os.path.normpath(data_dir)), images_in(data_dir))]
    if not classes[0][1]:
        raise UserError(f"--data-dir {data_dir} holds no .png/.jpg/.jpeg images (directly or in subfolders)")
    from PIL import Image
    for _, paths in classes:  # a header check per file, so the error can name the bad one
        for path in paths:
            try:
                with Image.open(path) as im:
                    im.verify()
            except Exception as e:
                raise UserError(f"{path} is not a readable image ({type(e).__name__})")
    return classes


def _to_arrays(dataset, size, native):
    """Run the pipeline once: resize/crop to size x size, HWC uint8 -> (N, C, H, W) uint8."""
    import mindspore.dataset.vision as vision
    ops = []
    if size != native:
        ops += [vision.Resize(size), vision.CenterCrop(size)]
    ops.append(vision.HWC2CHW())
    dataset = dataset.map(operations=ops, input_columns="image", num_parallel_workers=2)
    images, labels = [], []
    for image, label in dataset.batch(1000).create_tuple_iterator(output_numpy=True):
        images.append(image)
        labels.append(label)
    return np.concatenate(images), np.concatenate(labels).astype(np.int32)


def _idx_arrays(images, size):
    """(N, 1, size, size) uint8 from read_idx's (N, rows, cols), resized through mindspore.dataset.
    MnistDataset reads only uncompressed files, so the arrays go in instead, IDX_CHUNK images per
    row (Resize and CenterCrop take <..., H, W, C>): 60000 images take 1 s, one per row 7 s."""
    import mindspore.dataset as ds
    import mindspore.dataset.vision as vision
    chunks = lambda: ((images[i:i + IDX_CHUNK, ..., None],) for i in range(0, len(images), IDX_CHUNK))
    source = ds.GeneratorDataset(chunks, ["image"], shuffle=False)
    if images.shape[1:] != (size, size):
        source = source.map(operations=[vision.Resize(size), vision.CenterCrop(size)], input_columns="image",
                            num_parallel_workers=2)
    out = np.concatenate([chunk for chunk, in source.create_tuple_iterator(output_numpy=True)])
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))  # NHWC -> NCHW (HWC2CHW takes one image)


def _decode_error(data_dir, err):
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return UserError(f"could not read the images in {data_dir}: {first[:160]}")


def load(dataset, data_dir, size):
    """(uint8 images (N, C, size, size), int32 labels, number of classes)."""
    import mindspore.dataset as ds
    try:
        if dataset in ("mnist", "fashion-mnist"):
            _require_dir(data_dir, dataset)
            images, labels = read_idx(data_dir, "train")
            return _idx_arrays(images, size), labels, IDX_CLASSES
        if dataset == "cifar10":
            check_cifar(data_dir)
            images, labels = _to_arrays(ds.Cifar10Dataset(data_dir, usage="train", shuffle=False), size, 32)
            return images, labels, 10
        classes = folder_classes(data_dir)
        files = [(path, k) for k, (_, paths) in enumerate(classes) for path in paths]
        import mindspore.dataset.vision as vision
        source = ds.GeneratorDataset(
            lambda: ((np.fromfile(p, np.uint8), np.int32(k)) for p, k in files), ["image", "label"], shuffle=False)
        source = source.map(operations=[vision.Decode(), vision.Resize(size), vision.CenterCrop(size)],
                            input_columns="image")
        images, labels = _to_arrays(source, size, size)
        return images, labels, len(classes)
    except UserError:
        raise
    except (RuntimeError, ValueError, OSError) as e:
        raise _decode_error(data_dir, e)


def held_out(dataset, data_dir, size):
    """The images no run trains on, (N, C, size, size) uint8, for metrics against unseen data: the
    test split (t10k-*) of an MNIST-format directory that has one; None otherwise."""
    if dataset not in ("mnist", "fashion-mnist"):
        return None
    if not all(_idx_found(data_dir, name) for name in IDX_FILES["test"]):
        return None
    try:
        return _idx_arrays(read_idx(data_dir, "test")[0], size)
    except (RuntimeError, ValueError, OSError) as e:
        raise _decode_error(data_dir, e)


def image_source(cfg):
    """The ArraySource of cfg.dataset, read from cfg.data_dir or else default_data_dir(cfg.dataset);
    its `held_out` images (the test split, or None) are for evaluation only."""
    size = cfg.image_size or NATIVE_SIZE[cfg.dataset]
    data_dir = cfg.data_dir or default_data_dir(cfg.dataset)
    images, labels, num_classes = load(cfg.dataset, data_dir, size)
    if images.shape[1] == 4:  # RGBA PNGs
        images = images[:, :3]
    if len(images) < cfg.batch_size:
        raise UserError(f"{data_dir} holds {len(images)} images, fewer than --batch-size {cfg.batch_size}")
    source = ArraySource(images, labels, cfg.batch_size, cfg.seed, num_classes)
    source.held_out = held_out(cfg.dataset, data_dir, size)
    return source
