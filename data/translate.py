"""Image-to-image data: two domains A and B, paired (pix2pix) or unpaired (CycleGAN).

One class, TranslationSource, serves both. Its constructors:

  task_source(task, data_dir, image_size, batch_size, seed)   built-in tasks on Fashion-MNIST (TASKS)
  folder_source(data_dir, image_size, batch_size, seed, paired)   the layouts of
      junyanz/pytorch-CycleGAN-and-pix2pix

Built-in tasks (train = the 60k training split, test = the t10k split, both via data.images.read_idx,
gzip or uncompressed; data_dir "" -> data.images.default_data_dir("fashion-mnist"), else
"--task T reads Fashion-MNIST and needs --data-dir (where to get it)"):

  edges2fashion  paired    A = edge_map(B) (below), B = the garment; all 10 classes; 1 channel each
  sneaker2boot   unpaired  A = class 7 (Sneaker), B = class 9 (Ankle boot); 1 channel
  trouser2dress  unpaired  A = class 1 (Trouser), B = class 3 (Dress); 1 channel

  Garments are resized from 28x28 to image_size x image_size (0 means 28, which keeps them) by
  mindspore.dataset.vision.Resize, BILINEAR, in a GeneratorDataset pipeline (data.images._idx_arrays).
  The edge map is computed after the resize, on the image_size x image_size garment, so A and B are
  aligned pixel for pixel at every size and the edges stay binary.

The edge operator, edge_map(images) (uint8 (..., H, W) -> uint8 (..., H, W) in {0, 255}), in exact
integer arithmetic on the pixel values 0..255:
  pad the image by one pixel replicating its border (np.pad mode="edge");
  gx, gy = the 3x3 Sobel correlations  gx: [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]],  gy = gx transposed
  (gx: right minus left column, gy: bottom minus top row);  m2 = gx^2 + gy^2;
  edge where m2 >= EDGE_THRESHOLD^2 * max(m2 over that image) and that max > 0, i.e. the Sobel gradient
  magnitude normalised by its per-image maximum is >= EDGE_THRESHOLD = 0.25 (16 * m2 >= max m2, no
  rounding); edges are 255 (white, +1 in [-1, 1]) on 0 (black, -1), the polarity of the garments
  themselves. A blank image has no edges. On Fashion-MNIST about a quarter of the pixels are edges
  (outline and inner seams, two pixels wide as Sobel edges are).

Folders (folder_source), read through mindspore.dataset (GeneratorDataset of file bytes ->
vision.Decode -> vision.Resize((image_size, image_size)), BILINEAR); 0 means 32:
  unpaired  DIR/trainA, DIR/trainB, DIR/testA, DIR/testB, all four required
  paired    DIR/train and DIR/test (DIR/val when there is no test): each image is A|B side by side,
            width 2W x height W: left half A, right half B (as the reference's aligned dataset); the
            halves are split after decoding and each is resized on its own (nothing bleeds across).
  Images are the .png/.jpg/.jpeg files anywhere under a folder (os.walk, as the reference's
  make_dataset), sorted by path: that is the FILE ORDER of test_a / test_b. Every image is resized
  straight to image_size x image_size (the reference resizes to --load_size then crops; we do not
  crop, and aspect ratios are not kept, as the reference's square resize). Channels follow the data,
  per domain: 1 when every file of the domain (train and test) is grayscale (PIL mode L, LA, 1, I, I;16
  or F), else 3 (RGB; grayscale files among color ones are replicated, alpha is dropped). A paired
  folder's A and B share their files, hence their channel count.
  Malformed data is one UserError line naming the file or folder: a missing subfolder, a folder with
  no images, an unreadable image (every file is decoded once by PIL first, JPEGs in draft mode, so a
  truncated file is refused by name before MindSpore's Decode sees it), a paired image whose width
  is odd or not twice its height, a training folder with fewer images than batch_size.

The source:
  next(rng=None) -> (a, b): float32 (batch_size, C, H, W) in [-1, 1] each. The order is a pure
      function of (seed, batch counter), as data/arrays.py's ArraySource: domain d's epoch e is the
      permutation np.random.default_rng([seed, d, e]) of its training images, the remainder of each
      epoch is dropped (fixed shapes). Paired: A and B take the same indices (domain 0's order).
      Unpaired: A uses domain 0's order and B domain 1's, each cycling through its own epochs, so the
      pairs are random (the reference's serial_batches=False) and each side covers its data every
      epoch. `rng` (the run's Generator) is accepted for the sources' interface and not consumed:
      the seed alone decides every batch, whatever else draws from the run's rng.
  state() -> {"counter": k} (JSON); load_state(state) resumes the exact stream.
  name, paired, shape_a, shape_b (C, H, W), batch_size, seed, num_classes (10 for tasks, None for
  folders), train_a / train_b (uint8 (N, C, H, W), the images batches are drawn from),
  labels_a / labels_b (int32 Fashion-MNIST classes, None for folders), test_a / test_b (uint8 held-out
  images in file order: paired, the aligned pairs; class tasks, the t10k images of each class),
  test_labels_a / test_labels_b (int32 or None), per_epoch_a / per_epoch_b (batches per epoch),
  kind = "translation". Built directly (tests, new sources):
  TranslationSource(name, train_a, train_b, test_a, test_b, batch_size, seed, paired, labels_a=None,
  labels_b=None, test_labels_a=None, test_labels_b=None, num_classes=None), uint8 or float arrays.
Also here: TASKS (name -> (kind "paired"/"unpaired", description)), edge_map(images), and
to_float(images) (uint8 -> float32 in [-1, 1], the conversion every batch goes through).
"""
import os

import numpy as np

from data.images import IMAGE_EXTENSIONS, IDX_CLASSES, _decode_error, _idx_arrays, _require_dir, \
    default_data_dir, read_idx, where_to_get
from loops.config import UserError

TASKS = {
    "edges2fashion": ("paired", "Fashion-MNIST: A = Sobel edge map of the garment, B = the garment"),
    "sneaker2boot": ("unpaired", "Fashion-MNIST: A = class 7 (Sneaker), B = class 9 (Ankle boot)"),
    "trouser2dress": ("unpaired", "Fashion-MNIST: A = class 1 (Trouser), B = class 3 (Dress)"),
}
CLASS_TASKS = {"sneaker2boot": (7, 9), "trouser2dress": (1, 3)}
EDGE_THRESHOLD = 0.25  # of the per-image maximum gradient magnitude
EDGE_SCALE = round(1 / EDGE_THRESHOLD ** 2)  # 16: the test in squares, m2 * 16 >= max m2, exact in integers
EDGE_CHUNK = 512  # images per edge_map step (int32 temporaries in cache-friendly pieces)
TASK_SIZE, FOLDER_SIZE = 28, 32  # image_size 0 means these
GRAY_MODES = ("L", "LA", "1", "I", "I;16", "F")
FOLDER_BATCH = 64


def to_float(images):
    """uint8 images -> float32 in [-1, 1] (float input is returned as float32)."""
    if images.dtype == np.uint8:
        return images.astype(np.float32) * np.float32(1 / 127.5) - np.float32(1.0)
    return images.astype(np.float32, copy=False)


class TranslationSource:
    kind = "translation"

    def __init__(self, name, train_a, train_b, test_a, test_b, batch_size, seed, paired, labels_a=None,
                 labels_b=None, test_labels_a=None, test_labels_b=None, num_classes=None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if paired and len(train_a) != len(train_b):
            raise ValueError(f"paired domains differ in size: {len(train_a)} A, {len(train_b)} B")
        for domain, images in (("A", train_a), ("B", train_b)):
            if len(images) < batch_size:
                raise UserError(f"{name}: domain {domain} has {len(images)} training images, "
                                f"fewer than --batch-size {batch_size}")
        self.name, self.paired = name, bool(paired)
        self.train_a, self.train_b, self.test_a, self.test_b = train_a, train_b, test_a, test_b
        self.labels_a, self.labels_b = labels_a, labels_b
        self.test_labels_a, self.test_labels_b = test_labels_a, test_labels_b
        self.num_classes = num_classes
        self.batch_size, self.seed = batch_size, seed
        self.shape_a, self.shape_b = tuple(train_a.shape[1:]), tuple(train_b.shape[1:])
        self.per_epoch_a = len(train_a) // batch_size
        self.per_epoch_b = len(train_b) // batch_size
        self.counter = 0
        self._perms = {}  # domain -> (epoch, permutation)

    def _indices(self, domain, k):
        n, per_epoch = ((len(self.train_a), self.per_epoch_a) if domain == 0
                        else (len(self.train_b), self.per_epoch_b))
        epoch, j = divmod(k, per_epoch)
        cached = self._perms.get(domain)
        if cached is None or cached[0] != epoch:
            cached = (epoch, np.random.default_rng([self.seed, domain, epoch]).permutation(n))
            self._perms[domain] = cached
        return cached[1][j * self.batch_size:(j + 1) * self.batch_size]

    def next(self, rng=None):
        """(a, b) float32 NCHW in [-1, 1]; rng is not consumed (the seed decides the order)."""
        k = self.counter
        self.counter += 1
        index_a = self._indices(0, k)
        index_b = index_a if self.paired else self._indices(1, k)
        return to_float(self.train_a[index_a]), to_float(self.train_b[index_b])

    def state(self):
        return {"counter": self.counter}

    def load_state(self, state):
        self.counter = int(state["counter"])


# ---------------------------------------------------------------- built-in tasks (Fashion-MNIST)

def edge_map(images):
    """The fixed edge operator of edges2fashion (module docstring): uint8 (..., H, W) -> {0, 255}."""
    images = np.asarray(images)
    flat = images.reshape(-1, *images.shape[-2:])
    out = np.empty(flat.shape, np.uint8)
    for i in range(0, len(flat), EDGE_CHUNK):
        p = np.pad(flat[i:i + EDGE_CHUNK].astype(np.int32), ((0, 0), (1, 1), (1, 1)), mode="edge")
        rows = p[:, :-2] + 2 * p[:, 1:-1] + p[:, 2:]  # Sobel is separable: [1, 2, 1] down, then the difference across
        gx = rows[:, :, 2:] - rows[:, :, :-2]
        cols = p[:, :, :-2] + 2 * p[:, :, 1:-1] + p[:, :, 2:]
        gy = cols[:, 2:] - cols[:, :-2]
        m2 = gx * gx + gy * gy  # at most 2 * 1020^2: exact in int32
        peak = m2.max(axis=(1, 2), keepdims=True)
        out[i:i + EDGE_CHUNK] = np.where((EDGE_SCALE * m2 >= peak) & (peak > 0), 255, 0)
    return out.reshape(images.shape)


def _resized(images, size):
    """(N, 1, size, size) uint8 from (N, H, W) uint8, through mindspore.dataset (BILINEAR)."""
    if len(images) == 0:
        return np.zeros((0, 1, size, size), np.uint8)
    return _idx_arrays(images, size)


def task_source(task, data_dir, image_size, batch_size, seed):
    """The TranslationSource of a built-in task (TASKS) on Fashion-MNIST in data_dir."""
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    size = image_size or TASK_SIZE
    if size < 4:
        raise UserError(f"--image-size must be at least 4, got {size}")
    data_dir = data_dir or default_data_dir("fashion-mnist")
    if not data_dir:
        raise UserError(f"--task {task} reads Fashion-MNIST and needs --data-dir ({where_to_get('fashion-mnist')})")
    _require_dir(data_dir, "fashion-mnist")
    train, train_labels = read_idx(data_dir, "train")
    test, test_labels = read_idx(data_dir, "test")
    if task == "edges2fashion":
        train_b, test_b = _resized(train, size), _resized(test, size)
        return TranslationSource(task, edge_map(train_b), train_b, edge_map(test_b), test_b, batch_size, seed,
                                 paired=True, labels_a=train_labels, labels_b=train_labels,
                                 test_labels_a=test_labels, test_labels_b=test_labels, num_classes=IDX_CLASSES)
    class_a, class_b = CLASS_TASKS[task]
    picks = {}
    for domain, k in (("a", class_a), ("b", class_b)):
        keep, keep_test = train_labels == k, test_labels == k  # boolean masks keep file order
        picks[domain] = (_resized(train[keep], size), train_labels[keep],
                         _resized(test[keep_test], size), test_labels[keep_test])
    (train_a, labels_a, test_a, test_labels_a), (train_b, labels_b, test_b, test_labels_b) = picks["a"], picks["b"]
    return TranslationSource(task, train_a, train_b, test_a, test_b, batch_size, seed, paired=False,
                             labels_a=labels_a, labels_b=labels_b, test_labels_a=test_labels_a,
                             test_labels_b=test_labels_b, num_classes=IDX_CLASSES)


# ---------------------------------------------------------------- folders (the reference layouts)

def _images_under(folder, what):
    """The image paths anywhere under folder, sorted; UserError if it is missing or holds none."""
    if not os.path.isdir(folder):
        raise UserError(f"missing folder {folder} ({what})")
    paths = sorted(os.path.join(root, f) for root, _, files in os.walk(folder) for f in files
                   if f.endswith(IMAGE_EXTENSIONS))
    if not paths:
        raise UserError(f"{folder} holds no .png/.jpg/.jpeg images ({what})")
    return paths


def _check_files(paths, paired, size):
    """Decode every file with PIL once (JPEGs at a reduced scale, PIL's draft mode), so the error names
    the bad one and MindSpore never meets a file it would fail on (its Decode error names no file,
    dumps ./abnormal_image.jpg, and a truncated JPEG header can crash it with SIGFPE).
    True when every file is grayscale."""
    from PIL import Image
    gray = True
    for path in paths:
        try:
            with Image.open(path) as im:
                mode, (w, h) = im.mode, im.size
                if im.format == "JPEG":
                    im.draft(im.mode, (size, size))
                im.load()
        except Exception as e:
            detail = (str(e).strip().splitlines() or [""])[0][:80]
            raise UserError(f"{path} is not a readable image ({type(e).__name__}{': ' + detail if detail else ''})")
        if paired and (w % 2 or w != 2 * h):
            why = "odd" if w % 2 else f"not twice its height {h}"
            raise UserError(f"{path} is {w}x{h}: a paired image is A|B side by side, width 2W x height W "
                            f"(its width {w} is {why})")
        gray = gray and mode in GRAY_MODES
    return gray


def _split_halves(image):
    """(H, 2W, C) -> (H, W, 2C): A's channels then B's, so one Resize treats both halves apart."""
    w = image.shape[1] // 2
    return np.ascontiguousarray(np.concatenate([image[:, :w], image[:, w:2 * w]], axis=2))


def _read_folder(paths, size, paired, folder):
    """uint8 (N, size, size, 3) (unpaired) or (N, size, size, 6) (paired: A then B) in path order."""
    import mindspore.dataset as ds
    import mindspore.dataset.vision as vision
    ops = [vision.Decode()] + ([_split_halves] if paired else []) + [vision.Resize((size, size))]
    source = ds.GeneratorDataset(lambda: ((np.fromfile(p, np.uint8),) for p in paths), ["image"], shuffle=False)
    source = source.map(operations=ops, input_columns="image").batch(FOLDER_BATCH)
    try:
        out = np.concatenate([b for b, in source.create_tuple_iterator(output_numpy=True)])
    except (RuntimeError, ValueError, OSError) as e:  # PIL read every file: rare
        raise _decode_error(folder, e)
    if len(out) != len(paths):
        raise UserError(f"could not read the images in {folder}: {len(out)} of {len(paths)} came through")
    return out


def _nchw(images, channels):
    """(N, H, W, 3) uint8 -> (N, channels, H, W); 1 channel takes R (= G = B for grayscale files)."""
    return np.ascontiguousarray(images[..., :channels].transpose(0, 3, 1, 2))


def folder_source(data_dir, image_size, batch_size, seed, paired):
    """The TranslationSource of a folder in the reference layout (module docstring)."""
    if not data_dir:
        raise UserError("a folder translation task needs --data-dir (trainA/ trainB/ testA/ testB/ for unpaired, "
                        "train/ and test/ of A|B images for paired)")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} is not a directory")
    size = image_size or FOLDER_SIZE
    if size < 4:
        raise UserError(f"--image-size must be at least 4, got {size}")
    name = os.path.basename(os.path.normpath(data_dir))
    if paired:
        layout = "the paired layout: train/ and test/ (or val/) of A|B images side by side"
        train_dir = os.path.join(data_dir, "train")
        test_dir = os.path.join(data_dir, "test")
        if not os.path.isdir(test_dir) and os.path.isdir(os.path.join(data_dir, "val")):
            test_dir = os.path.join(data_dir, "val")
        train_paths, test_paths = _images_under(train_dir, layout), _images_under(test_dir, layout)
        if len(train_paths) < batch_size:
            raise UserError(f"{train_dir} holds {len(train_paths)} images, fewer than --batch-size {batch_size}")
        gray = _check_files(train_paths, True, size) & _check_files(test_paths, True, size)
        c = 1 if gray else 3
        train = _read_folder(train_paths, size, True, train_dir)
        test = _read_folder(test_paths, size, True, test_dir)
        return TranslationSource(name, _nchw(train[..., :3], c), _nchw(train[..., 3:], c),
                                 _nchw(test[..., :3], c), _nchw(test[..., 3:], c), batch_size, seed, paired=True)
    layout = "the unpaired layout: trainA/ trainB/ testA/ testB/"
    dirs = {part: os.path.join(data_dir, part) for part in ("trainA", "trainB", "testA", "testB")}
    paths = {part: _images_under(d, layout) for part, d in dirs.items()}
    for part in ("trainA", "trainB"):
        if len(paths[part]) < batch_size:
            raise UserError(f"{dirs[part]} holds {len(paths[part])} images, fewer than --batch-size {batch_size}")
    gray = {part: _check_files(p, False, size) for part, p in paths.items()}
    arrays = {part: _read_folder(p, size, False, dirs[part]) for part, p in paths.items()}
    c_a = 1 if gray["trainA"] and gray["testA"] else 3
    c_b = 1 if gray["trainB"] and gray["testB"] else 3
    return TranslationSource(name, _nchw(arrays["trainA"], c_a), _nchw(arrays["trainB"], c_b),
                             _nchw(arrays["testA"], c_a), _nchw(arrays["testB"], c_b), batch_size, seed,
                             paired=False)
