"""``pf.data.map_batched`` in a pipeline served by the tf.data service: an in-process
dispatcher and worker (as a cluster would run them on other machines) produce the same
batches as the local pipeline.

    python examples/scaling_out/data_service.py
"""

import numpy as np
import tensorflow as tf

import pfor_core as pf


def features(x):
    """Per-example preprocessing written for ONE example: standardize, then a few
    nonlinear features."""
    z = (x - tf.reduce_mean(x)) / (tf.math.reduce_std(x) + 1e-6)
    return tf.concat([z, tf.square(z), tf.nn.softplus(z)], axis=0)


def pipeline():
    rng = np.random.default_rng(0)
    examples = rng.standard_normal([40, 5]).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(examples).apply(
        pf.data.map_batched(features, 8, fallback="error"))


def main():
    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=address))
    served = pipeline().apply(tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.OFF,
        service=dispatcher.target))
    local = [b.numpy() for b in pipeline()]
    remote = [b.numpy() for b in served]
    assert len(local) == len(remote) == 5, (len(local), len(remote))
    for a, b in zip(local, remote):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    print("OK", len(remote), "batches of", remote[0].shape)
    del worker


if __name__ == "__main__":
    main()
