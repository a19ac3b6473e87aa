"""pfor converter pack for tf.nn ops and their gradients: activations, bias, losses,
convolutions (also grouped and depthwise), pooling, normalization, image ops and
space/batch moves."""

__version__ = "0.7.2"
