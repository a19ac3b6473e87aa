"""The scale-out examples (examples/scaling_out/, documented in docs/scaling_out.rst):
a DP-SGD step under MultiWorkerMirroredStrategy with two worker processes on localhost
(TF_CONFIG, gRPC) and under MirroredStrategy with two logical devices, with and without
XLA, gives one process's updates; pf.data.map_batched served by the tf.data service
gives the local pipeline's batches. Each runs in fresh processes (cluster and logical
devices are fixed when TensorFlow starts)."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "scaling_out"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _results(stdout: str) -> dict:
    """``RESULT [name] <weights as JSON>`` lines: weights by name ("worker" unnamed)."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            name, _, value = line[len("RESULT "):].partition("[[")
            found[name.strip() or "worker"] = np.asarray(json.loads("[[" + value))
    return found


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_dp_sgd_step_is_the_same_on_one_device_mirrored_and_under_xla():
    run = subprocess.run([sys.executable, str(EXAMPLES / "dp_sgd.py")], capture_output=True,
                         text=True, timeout=600, env=ENV, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    results = _results(run.stdout)
    assert len(results) == 3, run.stdout
    reference = results.pop("one device")
    for name, value in results.items():
        np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6, err_msg=name)


def test_dp_sgd_step_under_multi_worker_mirrored_strategy():
    ports = ",".join(str(p) for p in _free_ports(2))
    workers = [subprocess.Popen([sys.executable, str(EXAMPLES / "dp_sgd.py"), "--worker",
                                 str(k), "--ports", ports], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=ENV)
               for k in range(2)]
    outputs = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=600)
            assert worker.returncode == 0, err[-3000:]
            outputs.append(_results(out)["worker"])
    finally:
        for worker in workers:
            worker.kill()
    single = subprocess.run([sys.executable, "-c", (
        "import sys; sys.path.insert(0, %r); import dp_sgd, json, tensorflow as tf; "
        "print('RESULT', json.dumps(dp_sgd.train(tf.distribute.OneDeviceStrategy("
        "'/cpu:0')).tolist()))") % str(EXAMPLES)], capture_output=True, text=True,
        timeout=600, env=ENV, check=False)
    assert single.returncode == 0, single.stderr[-3000:]
    reference = _results(single.stdout)["worker"]
    for k, value in enumerate(outputs):
        np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6,
                                   err_msg=f"worker {k}")


def test_map_batched_served_by_the_tf_data_service():
    run = subprocess.run([sys.executable, str(EXAMPLES / "data_service.py")],
                         capture_output=True, text=True, timeout=600, env=ENV, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "OK 5 batches of (8, 15)" in run.stdout
