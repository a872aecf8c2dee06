#!/usr/bin/env python3
"""The GPU check's table: one line per item from the results folder scripts/gpu/check.sh
fills (build.json, ctest-*.xml, parity.json, bench.json); items whose phase did not run
are left out. Prints the table, writes it to RESULTS/summary.txt and the rows to
RESULTS/summary.json. Exit status 1 when an item is marked FAIL.

Usage: scripts/gpu/summary.py RESULTS
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

DOCTEST = re.compile(r"test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped")


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def test_row(results, label):
    """(item, result, figures) for ctest-LABEL.xml: suites and doctest cases."""
    path = os.path.join(results, f"ctest-{label}.xml")
    if not os.path.exists(path):
        return None
    suites = {"passed": [], "failed": [], "skipped": []}
    cases = [0, 0, 0, 0]  # total, passed, failed, skipped
    for tc in ET.parse(path).getroot().iter("testcase"):
        status = tc.get("status", "")
        if status == "fail" or tc.find("failure") is not None:
            suites["failed"].append(tc.get("name"))
        elif status in ("notrun", "disabled") or tc.find("skipped") is not None:
            suites["skipped"].append(tc.get("name"))
        else:
            suites["passed"].append(tc.get("name"))
        for m in DOCTEST.findall(tc.findtext("system-out") or ""):
            cases = [c + int(v) for c, v in zip(cases, m)]
    ran = sum(len(v) for v in suites.values())
    planned_path = os.path.join(results, f"ctest-{label}-planned.txt")
    not_run = 0
    if os.path.exists(planned_path):
        with open(planned_path) as f:
            not_run = max(0, len([l for l in f if l.strip()]) - ran)
    text = (f"{ran} suites: {len(suites['passed'])} passed, {len(suites['failed'])} failed"
            f"{' (' + ', '.join(suites['failed']) + ')' if suites['failed'] else ''}, "
            f"{len(suites['skipped'])} skipped{' (' + ', '.join(suites['skipped']) + ')' if suites['skipped'] else ''}"
            f"{f', {not_run} not run (time box)' if not_run else ''}; "
            f"test cases {cases[1]} passed, {cases[2]} failed, {cases[3]} skipped")
    ok = not suites["failed"] and ran > 0
    if label == "cuda" and suites["skipped"] and not suites["passed"]:
        ok = False  # on the GPU machine a skipped CUDA suite means it saw no GPU
        text += "; the CUDA suite skips only when it sees no GPU"
    return f"{label} tests", ok, text


def rows_of(results):
    rows = []
    build = load_json(os.path.join(results, "build.json"))
    if build:
        rows.append(("build", build["ok"], f"{build['seconds']} s with {build['jobs']} jobs"))
    for label in ("cuda", "cpu"):
        row = test_row(results, label)
        if row:
            rows.append(row)
    parity = load_json(os.path.join(results, "parity.json"))
    if parity:
        for it in parity["items"]:
            rows.append((f"parity {it['name']}", it["pass"], it["detail"]))
    bench = load_json(os.path.join(results, "bench.json"))
    if bench:
        c = bench["ceiling"]
        rows.append(("fp32 matmul ceiling", None, f"{c['tflops']:.1f} TFLOP/s ({c['gpu']}, {c['n']}^3, TF32 off)"))
        for name, r in bench["configs"].items():
            if r["ratio"] is None:
                text = "not measured: " + "; ".join(r["errors"])
            else:
                text = (f"dtrain {r['dtrain_images_per_s']:,.0f} img/s, PyTorch {r['torch_images_per_s']:,.0f}: "
                        f"{r['ratio']:.2f}x (bar {r['bar']}x); ceiling share dtrain "
                        f"{r['dtrain_ceiling_share']:.1%}, PyTorch {r['torch_ceiling_share']:.1%}")
            rows.append((f"bench {r['model']} batch {r['batch']}", r["pass"], text))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    results = sys.argv[1]
    rows = rows_of(results)
    env_path = os.path.join(results, "environment.txt")
    env = open(env_path).read().strip().splitlines() if os.path.exists(env_path) else []
    lines = ["dtrain GPU check" + (f": {env[1]}" if len(env) > 1 else "")]
    lines.append(f"{'item':28} {'result':6}  figures")
    for name, ok, text in rows:
        lines.append(f"{name:28} {'' if ok is None else 'PASS' if ok else 'FAIL':6}  {text}")
    if not rows:
        lines.append("(no results yet)")
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(results, "summary.txt"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump([{"item": n, "pass": ok, "figures": t} for n, ok, t in rows], f, indent=1)
    sys.exit(1 if any(ok is False for _, ok, _ in rows) else 0)


if __name__ == "__main__":
    main()
