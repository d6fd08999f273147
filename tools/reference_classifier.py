"""Train the metrics classifier of an image dataset as a training run would, report its
accuracy on the held-out tenth and on the dataset's test split, and write it to metrics/reference/,
where every machine reads it before any cache (metrics/classifier.py):

    python -m tools.reference_classifier --dataset fashion-mnist [--data-dir DIR] [--image-size 28]

The classifier's initial weights are seeded (classifier VERSION 2), so an empty cache rebuilds the
shipped file bit for bit.
"""
import os
import sys


def main(argv):
    from loops.config import CommandLineParser
    parser = CommandLineParser(prog="python -m tools.reference_classifier", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=["mnist", "fashion-mnist"])
    parser.add_argument("--data-dir", default="", help="default: where train_gan.py looks for the dataset")
    parser.add_argument("--image-size", type=int, default=28)
    parser.add_argument("--out", default=None, help="directory to write it to (default: metrics/reference)")
    args = parser.parse_args(argv)

    import mindspore as ms
    from data.images import default_data_dir, held_out, load, read_idx
    from metrics import classifier

    ms.set_context(mode=ms.GRAPH_MODE)
    data_dir = args.data_dir or default_data_dir(args.dataset)
    images, labels, classes = load(args.dataset, data_dir, args.image_size)
    print(f"training the metrics classifier of {args.dataset} ({len(images)} images)", flush=True)
    net, accuracy = classifier.train(images, labels, classes, log=lambda line: print(line, flush=True))
    test = held_out(args.dataset, data_dir, args.image_size)
    report = f"held-out accuracy {accuracy:.4f} ({len(images) // 10} training images)"
    if test is not None:
        _, test_labels = read_idx(data_dir, "test")
        _, probs = classifier.FeatureExtractor(net)(classifier.to_float(test))
        report += f", test-split accuracy {float((probs.argmax(1) == test_labels).mean()):.4f} ({len(test)} images)"
    key = classifier.data_key(images, labels)
    path = os.path.join(args.out or classifier.REFERENCE_DIR, f"classifier-{key}.ckpt")
    classifier.write(net, accuracy, key, path)
    print(f"{args.dataset}: {report}; written {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loops.config import run_cli
    run_cli(main)
