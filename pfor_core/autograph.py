"""Keep AutoGraph out of the library.

Called from an AutoGraph-converted ``tf.function``, our entry points would otherwise be
converted recursively (the converters and the plugin loader included), which changes
their Python semantics.
"""

import tensorflow as tf

do_not_convert = tf.autograph.experimental.do_not_convert
