"""Model registry: architecture name -> (generator, discriminator) constructors.
A new model is its file plus one line here. Cells only: nothing here imports the training code."""
from models.biggan import BigGANDiscriminator, BigGANGenerator
from models.dcgan import DCGANDiscriminator, DCGANGenerator
from models.mlp import MLPDiscriminator, MLPGenerator
from models.resnet import SNGANDiscriminator, SNGANGenerator

ARCHS = {
    "mlp": (MLPGenerator, MLPDiscriminator),
    "dcgan": (DCGANGenerator, DCGANDiscriminator),
    "biggan": (BigGANGenerator, BigGANDiscriminator),
    "sngan": (SNGANGenerator, SNGANDiscriminator),
}
