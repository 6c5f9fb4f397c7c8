"""The version check ``import numba_cuda_launch`` makes: numba, numba-cuda
and numba-cuda-mlir (when installed) by one rule -- older than supported is
an ImportError naming both versions, a newer release line a RuntimeWarning."""

import warnings

import pytest

from numba_cuda_launch.compat import versions

# The package's name as its messages spell it (numba.cuda.cpu_launch in a
# numba-cuda built from patches/).
PACKAGE = versions.__name__.rsplit(".compat.", 1)[0]

DISTRIBUTIONS = ["numba", "numba-cuda", "numba-cuda-mlir"]


def installed_as(monkeypatch, **given):
    """Make check_versions see *given* versions ({"numba_cuda": "0.1.0"}),
    the others at their newest checked release."""
    wanted = {d: versions.SUPPORTED[d][1] for d in DISTRIBUTIONS}
    wanted.update({k.replace("_", "-"): v for k, v in given.items()})
    monkeypatch.setattr(versions, "installed_version", lambda d: wanted[d])


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_older_than_supported_is_refused_naming_both_versions(monkeypatch, dist):
    installed_as(monkeypatch, **{dist.replace("-", "_"): "0.1.0"})
    oldest, newest = versions.SUPPORTED[dist]
    with pytest.raises(ImportError) as info:
        versions.check_versions()
    text = str(info.value)
    assert "supports %s %s to %s" % (dist, oldest, newest) in text
    assert "0.1.0 is installed" in text


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_newer_release_line_warns(monkeypatch, dist):
    major, minor = versions.SUPPORTED[dist][1].split(".")[:2]
    newer = "%s.%d.0" % (major, int(minor) + 1)
    installed_as(monkeypatch, **{dist.replace("-", "_"): newer})
    with pytest.warns(RuntimeWarning) as record:
        versions.check_versions()
    assert [str(w.message) for w in record] == [
        "%s was checked with %s up to %s; %s is installed"
        % (PACKAGE, dist, versions.SUPPORTED[dist][1], newer)]


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_newer_patch_release_of_a_checked_line_passes(monkeypatch, dist):
    newest = versions.SUPPORTED[dist][1]
    installed_as(monkeypatch, **{dist.replace("-", "_"): newest.rsplit(".", 1)[0] + ".99"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        versions.check_versions()


def test_numba_cuda_mlir_not_installed_is_not_checked(monkeypatch):
    installed_as(monkeypatch)
    have = versions.installed_version
    monkeypatch.setattr(versions, "installed_version",
                        lambda d: None if d == "numba-cuda-mlir" else have(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        versions.check_versions()


def test_numba_cuda_not_installed_passes_with_numba_cuda_mlir(monkeypatch):
    installed_as(monkeypatch)
    have = versions.installed_version
    monkeypatch.setattr(versions, "installed_version",
                        lambda d: None if d == "numba-cuda" else have(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        versions.check_versions()


def test_no_kernel_compiler_is_refused_naming_both_extras(monkeypatch):
    installed_as(monkeypatch)
    have = versions.installed_version
    monkeypatch.setattr(versions, "installed_version",
                        lambda d: None if d in versions.COMPILERS else have(d))
    with pytest.raises(ImportError) as info:
        versions.check_versions()
    text = str(info.value)
    assert text.startswith(PACKAGE + " needs a CUDA kernel compiler for Numba, "
                           "numba-cuda-mlir or numba-cuda; neither is installed")
    assert 'numba-cuda-launch[mlir]' in text and 'numba-cuda-launch[cu13]' in text


def test_numba_not_installed_is_refused(monkeypatch):
    installed_as(monkeypatch)
    monkeypatch.setattr(versions, "installed_version", lambda d: None if d == "numba" else "1")
    with pytest.raises(ImportError, match=r"needs numba 0\.62\.1 to 0\.68\.1; it is not installed"):
        versions.check_versions()


def test_installed_versions_pass():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        versions.check_versions()
