"""A Numba kernel in a JAX computation spread over two processes, one GPU each.

The processes join with ``jax.distributed.initialize`` (coordinator on
localhost) and run one ``jax.jit``-ed ``shard_map`` over the global mesh of
both GPUs: each process's shard goes through the kernel (this package's FFI
handler, launched on that process's GPU), then a ``psum`` over the mesh adds
the shards' sums across the processes (NCCL). The launcher then runs the same
computation in one process on one GPU and checks the numbers agree, and both
against NumPy.

    .venv/bin/python examples/jax_multiprocess.py            # launcher: both runs, then the check
    .venv/bin/python examples/jax_multiprocess.py worker ID  # one process of the pair, by hand:
        NCL_COORDINATOR=localhost:12355 NCL_NUM_PROCESSES=2 ... worker 0  (and worker 1)
    .venv/bin/python examples/jax_multiprocess.py single     # one process, one GPU

Each worker uses GPU ``ID`` (``CUDA_VISIBLE_DEVICES``, unless already set)
and writes ``multi_<ID>.npz`` into ``--out``. ``--platform cpu`` runs the
same orchestration on CPU devices with a jnp stand-in for the kernel (the
test suite's check of the launcher without a GPU).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile

N_PER_PROCESS = 1 << 16
A = 0.75


def inputs(n):
    import numpy as np

    rng = np.random.default_rng(1234)  # every process makes the same global arrays
    return (rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def computation(platform):
    """step(x, y) -> (a*x + y, sum of it): the kernel on this device's data."""
    import jax.numpy as jnp
    import numpy as np

    if platform == "cpu":
        def saxpy_jax(x, y, a):
            return a * x + y
    else:
        from numba import cuda

        from numba_cuda_launch.jax import jax_kernel

        @cuda.jit
        def saxpy(x, y, out, a):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]

        saxpy_jax = jax_kernel(saxpy, lambda x, y, a: x,
                               lambda x, y, a: ((x.shape[0] + 255) // 256, 256),
                               scalars={"a": np.float32})

    def step(x, y):
        z = saxpy_jax(x, y, a=A)
        return z, jnp.sum(z)
    return step


def sharded(step, mesh):
    import jax
    from jax.sharding import PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:  # older JAX
        from jax.experimental.shard_map import shard_map

    def local(x, y):
        z, s = step(x, y)
        return z, jax.lax.psum(s, "d")  # across the processes

    return jax.jit(shard_map(local, mesh=mesh, in_specs=(P("d"), P("d")),
                             out_specs=(P("d"), P())))


def run_worker(process_id, num_processes, coordinator, out, platform):
    if platform == "gpu":
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(process_id))
    import jax

    if platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
        try:  # cross-process CPU collectives (the default in some JAX versions)
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        except Exception:
            pass
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    assert len(devices) == num_processes and jax.local_device_count() == 1, devices
    mesh = Mesh(np.array(devices), ("d",))
    n = N_PER_PROCESS * num_processes
    x, y = inputs(n)
    sharding = NamedSharding(mesh, P("d"))
    gx = jax.make_array_from_callback((n,), sharding, lambda idx: x[idx])
    gy = jax.make_array_from_callback((n,), sharding, lambda idx: y[idx])
    z, s = sharded(computation(platform), mesh)(gx, gy)
    z_all = multihost_utils.process_allgather(z, tiled=True)
    np.savez(os.path.join(out, "multi_%d.npz" % process_id), z=np.asarray(z_all),
             s=np.asarray(s), device=str(jax.local_devices()[0]))
    print("process %d of %d on %s: sum %.6f" % (process_id, num_processes,
                                                jax.local_devices()[0], float(s)), flush=True)
    jax.distributed.shutdown()


def run_single(num_processes, out, platform):
    if platform == "gpu":
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    import jax
    import numpy as np

    if platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
    n = N_PER_PROCESS * num_processes
    x, y = inputs(n)
    z, s = jax.jit(computation(platform))(x, y)
    np.savez(os.path.join(out, "single.npz"), z=np.asarray(z), s=np.asarray(s))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(num_processes, platform, timeout):
    """Start the workers and the single-process run; check their results."""
    import numpy as np

    if platform == "gpu":
        from numba import cuda

        found = len(cuda.gpus) if cuda.is_available() else 0
        if found < num_processes:
            print("jax_multiprocess: needs %d GPUs (one per process), found %d; skipped "
                  "(--platform cpu runs the same orchestration on CPU devices)"
                  % (num_processes, found))
            raise SystemExit(0)
    out = tempfile.mkdtemp(prefix="ncl_multiprocess_")
    coordinator = "localhost:%d" % free_port()
    me = os.path.abspath(__file__)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if platform == "gpu":
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    common = ["--out", out, "--platform", platform, "--num-processes", str(num_processes),
              "--coordinator", coordinator]
    # GPU i of what this process may use (CUDA_VISIBLE_DEVICES, if set) for process i
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    workers = []
    for pid in range(num_processes):
        wenv = dict(env)
        if platform == "gpu":
            wenv["CUDA_VISIBLE_DEVICES"] = visible[pid] if len(visible) > pid else str(pid)
        workers.append(subprocess.Popen([sys.executable, me, "worker", str(pid)] + common,
                                        env=wenv))
    try:
        codes = [w.wait(timeout=timeout) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    if any(codes):
        raise SystemExit("a worker failed (exit codes %s)" % codes)
    senv = dict(env)
    if platform == "gpu":
        senv["CUDA_VISIBLE_DEVICES"] = visible[0] if visible else "0"
    single = subprocess.run([sys.executable, me, "single"] + common, env=senv, timeout=timeout)
    if single.returncode:
        raise SystemExit("the single-process run failed")

    x, y = inputs(N_PER_PROCESS * num_processes)
    ref = np.float32(A) * x + y
    one = np.load(os.path.join(out, "single.npz"))
    np.testing.assert_allclose(one["z"], ref, rtol=1e-6, atol=1e-6)
    for pid in range(num_processes):
        multi = np.load(os.path.join(out, "multi_%d.npz" % pid))
        # the kernel computes each element alike on either GPU: the same bits
        np.testing.assert_array_equal(multi["z"], one["z"])
        # the sums add in another order across the processes
        np.testing.assert_allclose(multi["s"], one["s"], rtol=1e-4, atol=1e-2)
        np.testing.assert_allclose(multi["s"], ref.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    print("OK: %d processes (%s) agree with one process and with NumPy (sum %.4f)"
          % (num_processes, ", ".join(str(np.load(os.path.join(out, "multi_%d.npz" % p))["device"])
                                     for p in range(num_processes)), float(one["s"])))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="launch", choices=["launch", "worker", "single"])
    parser.add_argument("process_id", nargs="?", type=int,
                        default=int(os.environ.get("NCL_PROCESS_ID", "0")))
    parser.add_argument("--num-processes", type=int,
                        default=int(os.environ.get("NCL_NUM_PROCESSES", "2")))
    parser.add_argument("--coordinator", default=os.environ.get("NCL_COORDINATOR",
                                                                "localhost:12355"))
    parser.add_argument("--out", default=os.environ.get("NCL_OUT", "."))
    parser.add_argument("--platform", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv)
    if args.mode == "worker":
        run_worker(args.process_id, args.num_processes, args.coordinator, args.out, args.platform)
    elif args.mode == "single":
        run_single(args.num_processes, args.out, args.platform)
    else:
        launch(args.num_processes, args.platform, args.timeout)


if __name__ == "__main__":
    main()
