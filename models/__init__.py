"""Model registry: architecture name -> (generator, discriminator) constructors.
A new model is its file plus one line here."""
import loops  # noqa: F401  (first: caps oneDNN at AVX2 before any kernel runs, see loops/__init__.py)
from models.dcgan import DCGANDiscriminator, DCGANGenerator
from models.mlp import MLPDiscriminator, MLPGenerator

ARCHS = {
    "mlp": (MLPGenerator, MLPDiscriminator),
    "dcgan": (DCGANGenerator, DCGANDiscriminator),
}
