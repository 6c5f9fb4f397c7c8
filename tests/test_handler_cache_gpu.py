"""jax_kernel handlers and @njit(cache=True) launch sites loaded from the
on-disk caches in new processes, launching real kernels on a GPU: results
against NumPy on fresh random data, outputs poisoned first."""

import os
import subprocess
import sys
import textwrap

import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda  # noqa: E402

from support.childenv import PREAMBLE, SAXPY_VARIANTS, child_env

jax = pytest.importorskip("jax")

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.skipif(
    not any(d.platform == "gpu" for d in jax.devices()) if cuda.is_available() else True,
    reason="JAX has no GPU here")]

_CHILD = PREAMBLE + textwrap.dedent('''
    import sys
    import numpy as np
    import numba
    import jax, jax.numpy as jnp
    from numba import cuda
    from numba_cuda_launch.jax import jax_kernel
    import numba_cuda_launch as ncl

    variant = sys.argv[1]
    SIGN = 1
''') + SAXPY_VARIANTS + textwrap.dedent('''
    @numba.njit
    def rule(xs, ys, a):
        if len(xs) == 1:  # the kernel's 1-D form indexes with cuda.grid(1)
            return ((xs[0] + 127) // 128, 1), (128, 1)
        return (xs[0], (xs[-1] + 127) // 128), (1, 128)

    k = saxpy_variant(variant, rule, lambda x, y, a: ((x.shape[0] + 127) // 128, 128))
    rng = np.random.default_rng()
    n = int(rng.integers(1000, 5000))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    a = np.float32(rng.standard_normal())
    got = np.asarray(jax.jit(lambda x, y: k(x, y, a=a))(x, y))
    np.testing.assert_allclose(got, a * x + y, rtol=1e-5, atol=1e-6)
    if variant == "batch-aware":
        xs, ys = (rng.standard_normal((3, n)).astype(np.float32) for _ in range(2))
        got = np.asarray(jax.jit(jax.vmap(lambda x, y: k(x, y, a=a)))(xs, ys))
        np.testing.assert_allclose(got, a * xs + ys, rtol=1e-5, atol=1e-6)
    spec = jax.ShapeDtypeStruct((n,), np.float32)
    print("hits", k.handler([spec, spec], [spec]).cache_hits)
''')

_SITE = PREAMBLE + textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from numba import cuda
    import cached_site
    rng = np.random.default_rng()
    x = rng.standard_normal(1000).astype(np.float32)
    d = cuda.to_device(x)
    status = cached_site.run(d.__cuda_array_interface__["data"][0], 1000)
    cuda.synchronize()
    assert status == 0, status
    expected = x.copy()
    expected[:32] += 1  # the launcher's one block of 32 threads
    np.testing.assert_allclose(d.copy_to_host(), expected)
    print("hits", sum(cached_site.run.stats.cache_hits.values()))
''')


def _run(tmp_path, script, args, **env):
    path = tmp_path / "child.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)] + args, capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path),
                          env=child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"), **env))
    assert done.returncode == 0, done.stderr[-4000:]
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("variant", ["plain", "batch-aware", "dependent"])
def test_handler_from_the_cache_launches_on_the_gpu(tmp_path, variant):
    if variant == "dependent" and cuda.get_current_device().compute_capability < (9, 0):
        pytest.skip("dependent launches need compute capability 9.0")
    assert _run(tmp_path, _CHILD, [variant]) == 0
    assert _run(tmp_path, _CHILD, [variant]) == 1


def test_cached_launch_site_launches_on_the_gpu(tmp_path):
    from support.childenv import CACHED_LAUNCHER

    (tmp_path / "cached_site.py").write_text(CACHED_LAUNCHER)
    assert _run(tmp_path, _SITE, [str(tmp_path)]) == 0
    assert _run(tmp_path, _SITE, [str(tmp_path)]) == 1
    # a damaged index: compiled again, never a crash or a wrong launch
    (index,) = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs
                if f.startswith("cached_site.run") and f.endswith(".nbi")]
    with open(index, "r+b") as f:
        f.truncate(os.path.getsize(index) // 2)
    assert _run(tmp_path, _SITE, [str(tmp_path)]) == 0
