"""The table of ci/bench_ab.sh: every number both sides' JSON files report,
as the median of the runs, with head/base.

    python3 ci/bench_ab_table.py DIR      # DIR holds NAME.{base,head}.N.json

A number's row is its path in the JSON; in a list of objects, the object's
string fields and its "N" name it instead of its index.
"""

import collections
import glob
import json
import os
import statistics
import sys


def leaves(value, path=()):
    """(path, number) for every number below *value*."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (str(key),))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            name = str(i)
            if isinstance(item, dict):
                parts = [str(v) for k, v in item.items() if isinstance(v, str) or k == "N"]
                name = ", ".join(parts) or name
            yield from leaves(item, path + (name,))


def main(directory):
    runs = collections.defaultdict(list)  # (bench, side, path) -> values
    for fname in sorted(glob.glob(os.path.join(directory, "*.json"))):
        bench, side, _ = os.path.basename(fname).rsplit(".", 3)[:3]
        with open(fname) as f:
            for path, number in leaves(json.load(f)):
                runs[bench, side, path].append(number)
    print("| benchmark | row | base | head | head/base |")
    print("| --- | --- | --- | --- | --- |")
    for (bench, side, path), values in sorted(runs.items()):
        if side != "head" or path[:1] == ("info",) or path[-1] == "N" or (bench, "base", path) not in runs:
            continue
        base = statistics.median(runs[bench, "base", path])
        head = statistics.median(values)
        ratio = "%.3f" % (head / base) if base else "-"
        print("| %s | %s | %.4g | %.4g | %s |" % (bench, " / ".join(path), base, head, ratio))


if __name__ == "__main__":
    main(sys.argv[1])
