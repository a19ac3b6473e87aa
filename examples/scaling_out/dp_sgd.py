"""A DP-SGD step (per-example gradients, clipping, noise, apply) under a tf.distribute
strategy: the same update however many replicas and workers share the batch.

Run as one process (the reference, then two logical CPU devices under
MirroredStrategy, with and without XLA):
    python examples/scaling_out/dp_sgd.py
Or as worker k of a MultiWorkerMirroredStrategy cluster of localhost ports (each worker
in its own process, started with the same --ports):
    python examples/scaling_out/dp_sgd.py --worker 0 --ports 23456,23457 &
    python examples/scaling_out/dp_sgd.py --worker 1 --ports 23456,23457
Each run prints the weights after two steps; every way gives the same numbers.
"""

import argparse
import json
import os

import numpy as np

BATCH, FEATURES, OUTPUTS = 8, 3, 2
CLIP, NOISE, RATE, SEED = 1.0, 0.5, 0.1, (7, 11)


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal([BATCH, FEATURES]).astype(np.float32)
    y = rng.standard_normal([BATCH, OUTPUTS]).astype(np.float32)
    w = rng.standard_normal([FEATURES, OUTPUTS]).astype(np.float32)
    return x, y, w


def train(strategy, steps=2, jit_compile=False):
    """Two DP-SGD steps of a linear model: per-example gradients (pfor), each clipped to
    norm CLIP, summed over the replicas, Gaussian noise added once (a stateless draw,
    the same on every replica), divided by the global batch and applied."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    import pfor_core as pf  # pylint: disable=import-outside-toplevel

    x, y, w0 = data()
    with strategy.scope():
        # Every replica computes the same update: the first one's is applied.
        w = tf.Variable(w0, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def loss(xi, yi):
        return tf.reduce_sum((tf.linalg.matvec(w, xi, transpose_a=True) - yi) ** 2)

    @tf.function(jit_compile=jit_compile)
    def clipped_sum(xb, yb):
        grads = pf.per_example_gradients(loss, [w], xb, yb, fallback="error")[0]
        norms = tf.norm(tf.reshape(grads, [tf.shape(grads)[0], -1]), axis=1)
        scale = tf.minimum(1.0, CLIP / (norms + 1e-12))
        return tf.reduce_sum(grads * scale[:, None, None], axis=0)

    def replica_step(xb, yb, step):
        total = tf.distribute.get_replica_context().all_reduce("sum", clipped_sum(xb, yb))
        noise = tf.random.stateless_normal(total.shape, tf.stack([SEED[0], step]))
        w.assign_sub(RATE * (total + NOISE * CLIP * noise) / BATCH)

    def shard(context):
        # Worker k reads its own contiguous part of the batch.
        per = BATCH // context.num_input_pipelines
        begin = context.input_pipeline_id * per
        ds = tf.data.Dataset.from_tensor_slices((x[begin:begin + per], y[begin:begin + per]))
        return ds.batch(context.get_per_replica_batch_size(BATCH)).repeat()

    batches = iter(strategy.distribute_datasets_from_function(shard))

    @tf.function
    def step(batch, k):
        strategy.run(replica_step, args=(*batch, k))

    for k in range(steps):
        step(next(batches), tf.constant(k, tf.int32))
    return w.numpy() if not hasattr(w, "values") else w.values[0].numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker", type=int, help="this process's index in the cluster")
    parser.add_argument("--ports", help="comma-separated localhost ports of the workers")
    args = parser.parse_args()
    if args.worker is not None:
        ports = args.ports.split(",")
        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"worker": [f"localhost:{p}" for p in ports]},
            "task": {"type": "worker", "index": args.worker}})
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        print("RESULT", json.dumps(train(strategy).tolist()))
        return
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    results = {
        "one device": train(tf.distribute.OneDeviceStrategy("/cpu:0")),
        "MirroredStrategy, 2 devices": train(
            tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
        "MirroredStrategy, 2 devices, XLA": train(
            tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), jit_compile=True),
    }
    for name, value in results.items():
        print("RESULT", name, json.dumps(value.tolist()))


if __name__ == "__main__":
    main()
