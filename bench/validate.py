"""How long ``attnsweep validate`` takes on large grids, without listing their trials.

Times, in one process after the imports, what ``validate`` does for three specs: the spec
parse and checks (``load_spec``), then the pack count and memory check over the runs of one
shape (``count_packs``), against listing every trial through ``make_packs`` (the old way) for
the smallest spec only (the others would take minutes to hours).

    python bench/validate.py [--out bench-validate.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

SPECS = {
    "10^6 trials, two blocks": (
        "name: two\nseeds: 500\ngrid:\n"
        "  - {T: {start: 8, stop: 1024, num: 40, scale: log}, m: {start: 8, stop: 4096, num: 25, scale: log}, "
        "model: [transformer]}\n"
        "  - {T: {start: 8, stop: 1024, num: 40, scale: log}, m: {start: 8, stop: 4096, num: 25, scale: log}, "
        "model: [mlp]}\nfixed: {task: and, s: 2, d: 8, heads: 1, n_test: 100}\n"
    ),
    "9x10^6 trials, 9,021 shapes": (
        "name: big\nseeds: 1000\ngrid:\n  T: {start: 8, stop: 1024, num: 100, scale: log}\n"
        "  m: {start: 8, stop: 4096, num: 100, scale: log}\nfixed: {task: and, s: 2, d: 8, heads: 1, n_test: 100}\n"
    ),
    "10^7 shapes, one seed each (sampled)": (
        "name: wide\nseeds: 1\ngrid:\n  T: {start: 8, stop: 8192, num: 1000, scale: log}\n"
        "  m: {start: 8, stop: 100000000, num: 10000, scale: log}\nfixed: {task: and, s: 2, d: 8, heads: 1, n_test: 100}\n"
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench-validate.json"))
    args = ap.parse_args()
    from attnsweep.orchestrator.packing import count_packs, make_packs, spec_pack_sizer
    from attnsweep.orchestrator.spec import parse_spec, trial_id

    results = {}
    for label, text in SPECS.items():
        t0 = time.perf_counter()
        spec = parse_spec(text, max_trials=10**8)
        t1 = time.perf_counter()
        n, exact = count_packs(spec, spec_pack_sizer(spec, 2))
        t2 = time.perf_counter()
        row = dict(
            trials=spec.n_trials(),
            packs=n,
            exact=exact,
            load_s=round(t1 - t0, 3),
            count_s=round(t2 - t1, 3),
        )
        if label.startswith("10^6"):
            listed = sum(
                1
                for _ in make_packs(
                    ((trial_id(c), c) for c in spec.trials()),
                    spec_pack_sizer(spec, 2),
                    spec.experiment,
                )
            )
            row.update(listed_packs=listed, list_s=round(time.perf_counter() - t2, 1))
        results[label] = row
        print(label, row, flush=True)
    args.out.write_text(json.dumps(dict(machine=platform.processor() or platform.machine(), results=results), indent=2))


if __name__ == "__main__":
    main()
