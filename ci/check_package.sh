#!/usr/bin/env bash
# Build the wheel and sdist, check the sdist carries what the README names,
# install each in a fresh environment and run the CPU tests against the
# installed package (not the checkout).
#   bash ci/check_package.sh              everything
#   bash ci/check_package.sh --contents   build and check the sdist's contents only
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
python3 -m venv "$work/build" && "$work/build/bin/pip" install -q build
"$work/build/bin/python" -m build -q --outdir "$work/dist" . >/dev/null
ls "$work/dist"
# README.md names these (patches/ for the patched numba-cuda, the CI files).
listing=$(tar tzf "$work"/dist/*.tar.gz)
for path in patches/SERIES examples docs ci tests benchmarks .github/workflows .ci/run; do
  grep -q "^[^/]*/$path" <<<"$listing" || { echo "sdist lacks $path"; exit 1; }
done
echo "sdist carries patches/, examples/, docs/, ci/, tests/, benchmarks/, .github/, .ci/"
if [ "${1:-}" = "--contents" ]; then rm -rf "$work"; exit 0; fi
for artifact in "$work"/dist/*.whl "$work"/dist/*.tar.gz; do
  python3 -m venv "$work/env" && "$work/env/bin/pip" install -q "$artifact[cu13,test]"
  # run the tests from a copy without the package source next to them
  rm -rf "$work/t" && mkdir -p "$work/t" && cp -r tests "$work/t/"
  (cd "$work/t" && "$work/env/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests | tail -1)
  (cd "$work" && "$work/env/bin/python" -c "import numba_cuda_launch as m; assert '/site-packages/' in m.__file__, m.__file__; print('installed', m.__version__, 'from', m.__file__)")
  rm -rf "$work/env"
done
rm -rf "$work"
