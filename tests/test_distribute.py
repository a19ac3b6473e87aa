"""Per-example gradients inside tf.distribute.MirroredStrategy.run over two logical CPU
devices equal the single-device result. Logical devices must be configured before
TensorFlow starts, so the check runs in a fresh process."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import pfor_core as pf

    rng = np.random.default_rng(0)
    x = rng.standard_normal([8, 3]).astype(np.float32)
    t = rng.standard_normal([8, 2]).astype(np.float32)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        w = tf.Variable(rng.standard_normal([3, 2]).astype(np.float32))

    def loss_fn(xi, ti):
        return tf.reduce_sum((tf.linalg.matvec(w, xi, transpose_a=True) - ti) ** 2)

    single = pf.per_example_gradients(loss_fn, [w], x, t, fallback="error")[0].numpy()
    dataset = tf.data.Dataset.from_tensor_slices((x, t)).batch(8)
    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))

    @tf.function
    def step(xb, tb):
        return pf.per_example_gradients(loss_fn, [w], xb, tb, fallback="error")[0]

    per_replica = strategy.run(step, args=batch)
    parts = strategy.experimental_local_results(per_replica)
    assert len(parts) == 2, parts
    got = np.concatenate([p.numpy() for p in parts])
    np.testing.assert_allclose(got, single, rtol=1e-5, atol=1e-6)
    print("OK", got.shape)
""")


def test_per_example_gradients_under_mirrored_strategy():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3",
                                              "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK (8, 3, 2)" in result.stdout
