"""Model registry: architecture name -> (generator, discriminator) constructors.
A new model is its file plus one line here. Cells only: nothing here imports the training code."""
from models.dcgan import DCGANDiscriminator, DCGANGenerator
from models.mlp import MLPDiscriminator, MLPGenerator

ARCHS = {
    "mlp": (MLPGenerator, MLPDiscriminator),
    "dcgan": (DCGANGenerator, DCGANDiscriminator),
}
