"""File-based image datasets, read with mindspore.dataset's own readers:

  mnist, fashion-mnist  the standard IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte)
  cifar10               the standard binary batches (data_batch_1.bin ... data_batch_5.bin)
  folder                PNG/JPEG images, either one subfolder per class or all in one folder

The pipeline (decode, resize, center-crop, HWC -> CHW) runs once, in mindspore.dataset's parallel
workers, into a uint8 array held in memory (MNIST: 47 MB, CIFAR-10: 154 MB); batches are then
drawn by host indices (data/arrays.py). That keeps the order a pure function of the seed (exact
resume) and the step never waits on data: a batch costs one fancy-index and a cast (bench/).
Before reading, each directory is checked, so a missing or malformed file gives one line naming it.
"""
import os

import numpy as np

from data.arrays import ArraySource
from loops.config import UserError

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
CIFAR_RECORD = 1 + 32 * 32 * 3
CIFAR_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")
NATIVE_SIZE = {"mnist": 28, "fashion-mnist": 28, "cifar10": 32, "folder": 32}


def _require_dir(data_dir, dataset):
    if not data_dir:
        raise UserError(f"--dataset {dataset} needs --data-dir")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} is not a directory")


def check_idx(data_dir, dataset):
    """The two training IDX files exist, carry the right magic numbers, and agree on the count."""
    _require_dir(data_dir, dataset)
    images, labels = (os.path.join(data_dir, name) for name in IDX_FILES)
    for path in (images, labels):
        if not os.path.isfile(path):
            raise UserError(f"--dataset {dataset}: missing {path} (the standard IDX file, uncompressed)")
    with open(images, "rb") as f:
        head = f.read(16)
    with open(labels, "rb") as f:
        lhead = f.read(8)
    if len(head) < 16 or int.from_bytes(head[:4], "big") != 2051:
        raise UserError(f"{images} is not an IDX image file (bad header)")
    if len(lhead) < 8 or int.from_bytes(lhead[:4], "big") != 2049:
        raise UserError(f"{labels} is not an IDX label file (bad header)")
    n, rows, cols = (int.from_bytes(head[i:i + 4], "big") for i in (4, 8, 12))
    if os.path.getsize(images) != 16 + n * rows * cols:
        raise UserError(f"{images} is truncated or padded: header says {n} images of {rows}x{cols}, "
                        f"file has {os.path.getsize(images)} bytes")
    if int.from_bytes(lhead[4:8], "big") != n or os.path.getsize(labels) != 8 + n:
        raise UserError(f"{labels} does not hold {n} labels to match {images}")


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


def _decode_error(data_dir, err):
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return UserError(f"could not read the images in {data_dir}: {first[:160]}")


def load(dataset, data_dir, size):
    """(uint8 images (N, C, size, size), int32 labels, number of classes)."""
    import mindspore.dataset as ds
    try:
        if dataset in ("mnist", "fashion-mnist"):
            check_idx(data_dir, dataset)
            reader = ds.MnistDataset if dataset == "mnist" else ds.FashionMnistDataset
            images, labels = _to_arrays(reader(data_dir, usage="train", shuffle=False), size, 28)
            return images, labels, 10
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


def image_source(cfg):
    size = cfg.image_size or NATIVE_SIZE[cfg.dataset]
    images, labels, num_classes = load(cfg.dataset, cfg.data_dir, size)
    if images.shape[1] == 4:  # RGBA PNGs
        images = images[:, :3]
    if len(images) < cfg.batch_size:
        raise UserError(f"{cfg.data_dir} holds {len(images)} images, fewer than --batch-size {cfg.batch_size}")
    return ArraySource(images, labels, cfg.batch_size, cfg.seed, num_classes)
