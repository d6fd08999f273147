"""The named evaluation protocols (no MindSpore import: the metrics CLI checks its flags against them).

  quick  the default, used while training: the run's --eval-samples generated images against a random
         subset of the training images of the same size (all of them when the dataset has fewer)
  paper  as Mimicry and StudioGAN report: 50000 generated images against the full training set
         (python -m metrics RUN --protocol paper)
"""
PAPER_SAMPLES = 50000
PROTOCOLS = {
    "quick": "the run's --eval-samples (or --num) generated samples vs a random training subset of the same "
             "size (all training images when there are fewer)",
    "paper": f"{PAPER_SAMPLES} generated samples (or --num) vs the full training set, as Mimicry and StudioGAN",
}
