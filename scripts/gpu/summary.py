#!/usr/bin/env python3
"""The GPU check's table: one line per item from the results folder scripts/gpu/check.sh
fills (build.json, ctest-*.xml, memcheck.json, parity.json, bench.json, gpt-bench.json,
bench-step.json, phases.txt); items whose phase did not run are left out. Items with a bar
say PASS or FAIL, or UNMEASURED where dtrain refused the bar's precision on the GPU (its
one-line error is the reason given; for a benchmark bar the PyTorch side's figures follow)
or, for the peak-memory bar, where its metrics hold no device-memory figure, or, for the GPT
bars (gpt-bench.json's rows as scripts/bench/gpt_gpu_vs_pytorch.py words them), where a side
did not run (the reason given) or no peak is known for the card's MFU; the others (ceilings,
dtrain's variants and fp32/tf32/fp16 figures against a bf16 peer, bench step, elapsed
time) are figures only. Prints the table, writes it to RESULTS/summary.txt and the rows to
RESULTS/summary.json ("pass" null and "result" "UNMEASURED" for those). Exit status 1 when
an item is marked FAIL; UNMEASURED is not.

Usage: scripts/gpu/summary.py RESULTS
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

UNMEASURED = "UNMEASURED"  # a row's result when dtrain refused to run the bar's side
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


PHASE_FILES = {"memcheck": "memcheck.json", "parity": "parity.json", "bench": "bench.json", "gpt": "gpt-bench.json",
               "step": "bench-step.json"}
PHASE_LOGS = {"bench": "bench.log", "gpt": "gpt-bench.log", "step": "step.log"}


def num(v, fmt):
    return format(v, fmt) if v is not None else "-"


def gib(v):
    return f"{v / 2 ** 30:.2f} GiB" if v is not None else "-"


def peer_memory(r):
    """"; peak device memory ..." for a configuration in 16 bits (its side or its peer's): dtrain's
    and, unless it borrows another configuration's PyTorch figure, PyTorch's."""
    if r.get("precision", "fp32") not in ("bf16", "fp16") and r.get("peer_precision") != "bf16":
        return ""
    mem = r.get("dtrain_peak_memory_bytes")
    if mem is not None:
        dtrain = gib(mem)
    else:
        dtrain = "UNMEASURED (" + ("its run refused" if r.get("dtrain_unmeasured") else
                                   r.get("dtrain_peak_memory_unmeasured") or "no figure") + ")"
    torch = "" if r.get("against") else f", PyTorch {gib(r.get('torch_peak_memory_bytes'))}"
    return f"; peak device memory dtrain {dtrain}{torch}"


def memory_row(m):
    """The memory bar: dtrain's peak in the configuration against its own in the baseline."""
    torch = (f"; PyTorch {gib(m.get('torch_bytes'))} / {gib(m.get('torch_baseline_bytes'))}"
             + (f" = {m['torch_ratio']:.2f}x" if m.get("torch_ratio") is not None else
                f" ({m['torch_baseline_error']})" if m.get("torch_baseline_error") else ""))
    if m.get("ratio") is not None:
        text = (f"dtrain {m['config']} {gib(m['dtrain_bytes'])} / {m['baseline']} {gib(m['dtrain_baseline_bytes'])}"
                f" = {m['ratio']:.2f}x (bar <= {m['bar']:g}x; device_peak_bytes after the warm-up){torch}")
        ok = m["pass"]
    elif m.get("result") == UNMEASURED:
        text, ok = f"dtrain UNMEASURED: {m.get('unmeasured')} (bar <= {m['bar']:g}x){torch}", UNMEASURED
    else:
        text, ok = f"not measured: {'; '.join(m.get('errors') or ['?'])} (bar <= {m['bar']:g}x){torch}", False
    return f"bench peak memory {m.get('label', m['config'])}", ok, text


def bench_rows(bench):
    rows = []
    c = bench["ceiling"]
    rows.append(("fp32 matmul ceiling", None, f"{c['tflops']:.1f} TFLOP/s ({c['gpu']}, {c['n']}^3, TF32 off; "
                                              f"PyTorch {c.get('torch', '?')})"))
    for precision, c in bench.get("ceilings", {}).items():
        if precision == "fp32":
            continue
        text = (f"{c['tflops']:.1f} TFLOP/s ({c['gpu']}, {c['n']}^3{', TF32 on' if precision == 'tf32' else ''})"
                if c.get("tflops") else f"not measured: {c.get('error')}")
        rows.append((f"{precision} matmul ceiling", None, text))
    min_rounds = bench.get("min_rounds", 3)
    for name, r in bench["configs"].items():
        label = r.get("label", f"{r['model']} batch {r['batch']}")
        rounds = r.get("rounds", bench.get("rounds", 0))
        ok = r["pass"]
        # fp32 rows read as before; other precisions name theirs and their ceilings'.
        mixed = r.get("precision", "fp32") != "fp32" or r.get("peer_precision", "fp32") != "fp32"
        dtrain_p, peer_p = (f" {r['precision']}", f" {r['peer_precision']}") if mixed else ("", "")
        if r.get("dtrain_unmeasured"):
            ok = UNMEASURED
            runs = len(r.get("torch_runs", []))
            text = (f"dtrain{dtrain_p} UNMEASURED: {r['dtrain_unmeasured']}; PyTorch{peer_p} "
                    f"{num(r['torch_images_per_s'], ',.0f')} img/s (median of {runs} run{'s' if runs != 1 else ''}; "
                    f"bar {r['bar']:g}x), TFLOP/s {num(r.get('torch_tflops'), '.2f')} = "
                    f"{num(r.get('torch_ceiling_share'), '.1%')} of the{peer_p} ceiling" + peer_memory(r))
        elif r["ratio"] is None:
            text = "not measured: " + "; ".join(r["errors"])
        else:
            of = f"median of {rounds} round{'s' if rounds != 1 else ''}"
            if r["bar"] is None:
                of = "no bar; " + of
            elif rounds < min_rounds:
                of += f", fewer than the {min_rounds} the bar needs"
            bar = f"bar {r['bar']:g}x; " if r["bar"] is not None else ""
            of_ceiling = f"the{dtrain_p} ceiling" if mixed else "the ceiling"
            text = (f"dtrain{dtrain_p} {r['dtrain_images_per_s']:,.0f} img/s, PyTorch{peer_p} "
                    f"{r['torch_images_per_s']:,.0f}: {r['ratio']:.2f}x ({bar}{of}); TFLOP/s dtrain "
                    f"{num(r.get('dtrain_tflops'), '.2f')} = {num(r.get('dtrain_ceiling_share'), '.1%')} of "
                    f"{of_ceiling}, PyTorch {num(r.get('torch_tflops'), '.2f')} = "
                    f"{num(r.get('torch_ceiling_share'), '.1%')}" + (f" of the{peer_p} ceiling" if mixed else "")
                    + peer_memory(r))
        rows.append((f"bench {label}", ok, text))
    if bench.get("memory"):
        rows.append(memory_row(bench["memory"]))
    busy = bench.get("gpu_busy")
    if busy:
        if busy.get("median") is None:
            text = f"not measured: {busy.get('error')}"
        else:
            text = (f"SM % median {busy['median']:.0f} (bar {busy['bar']:.0f}) of {busy['samples']}, nvidia-smi "
                    f"dmon during dtrain {busy['config']} ({busy.get('images_per_s', 0):,.0f} img/s)")
        rows.append((f"GPU busy {busy['config']}", busy["pass"], text))
    for v in bench.get("variants", []):
        m = v.get("images_per_s") or {}
        if v.get("ratio"):
            cost = 1 - v["ratio"]
            text = (f"{v['key']}={v['value']} {m[v['value']]:,.0f} img/s against {m[v['baseline']]:,.0f} with "
                    f"{v['baseline']}: {v['ratio']:.3f}x, "
                    + (f"costs {cost:.1%}" if cost >= 0 else f"gains {-cost:.1%}")
                    + f" (medians of {min(len(r) for r in v['runs'].values())} alternated runs)")
            if v.get("error"):
                text += f"; {v['error']}"
        else:
            text = f"not measured: {v.get('error')}"
        rows.append((f"dtrain {v['config']} {v['label']}", None, text))
    return rows


def gpt_rows(gpt):
    """gpt-bench.json's rows as they are: its bars (PASS, FAIL, UNMEASURED) and figures."""
    return [(f"gpt {r['item']}", UNMEASURED if r["result"] == UNMEASURED else r["pass"], r["text"])
            for r in gpt["rows"]]


def step_rows(step):
    rows = []
    for r in step["runs"]:
        if r.get("json"):
            text = f"{r['json']} ({r['seconds']} s)" + (f": {r['digest']}" if r.get("digest") else "")
        else:
            text = f"no figures: {r.get('error')}"
        rows.append((f"bench step {r['name']}", None, text))
    return rows


def rows_of(results):
    rows = []
    build = load_json(os.path.join(results, "build.json"))
    if build:
        rows.append(("build", build["ok"], f"{build['seconds']} s with {build['jobs']} jobs"))
    for label in ("cuda", "cpu"):
        row = test_row(results, label)
        if row:
            rows.append(row)
    memcheck = load_json(os.path.join(results, "memcheck.json"))
    if memcheck:
        if memcheck.get("errors") is not None and memcheck.get("finished", True):
            text = (f"compute-sanitizer memcheck on the CUDA suite: {memcheck['errors']} errors in "
                    f"{memcheck['seconds']} s (cases {memcheck.get('excluded', '?')} left out; "
                    f"{memcheck.get('tests') or 'no doctest count'})")
        else:
            text = f"{memcheck.get('error', 'no result')} ({memcheck.get('seconds', 0)} s)"
        rows.append(("memcheck", memcheck["ok"], text))
    parity = load_json(os.path.join(results, "parity.json"))
    if parity:
        items = parity["items"]
        passed = sum(1 for it in items if it["pass"])
        unmeasured = [it["name"] for it in items if it.get("result") == UNMEASURED]
        failed = len(items) - passed - len(unmeasured)
        text = f"{passed} of {len(items)} items pass"
        if unmeasured:
            text += f", {len(unmeasured)} UNMEASURED ({', '.join(unmeasured)})"
        text += (f" (bar: all measured; the mixed-precision items ran {parity['mixed_epochs']} epoch(s))"
                 if "mixed_epochs" in parity else " (bar: all)")
        ok = UNMEASURED if failed == passed == 0 and unmeasured else failed == 0 and passed > 0
        rows.append(("parity", ok, text))
        for it in items:
            rows.append((f"parity {it['name']}", UNMEASURED if it.get("result") == UNMEASURED else it["pass"],
                         it["detail"]))
    bench = load_json(os.path.join(results, "bench.json"))
    if bench:
        rows += bench_rows(bench)
    gpt = load_json(os.path.join(results, "gpt-bench.json"))
    if gpt:
        rows += gpt_rows(gpt)
    step = load_json(os.path.join(results, "bench-step.json"))
    if step:
        rows += step_rows(step)
    phases_path = os.path.join(results, "phases.txt")
    if os.path.exists(phases_path):
        with open(phases_path) as f:
            times = [l.split() for l in f if len(l.split()) == 2]
        # A phase that ran (check.sh deletes its file first) but left no file stopped early.
        for phase, path in PHASE_FILES.items():
            if any(n == phase for n, _ in times) and not os.path.exists(os.path.join(results, path)):
                rows.append((phase, False, f"no {path}: the phase stopped before writing it (see its output"
                                           f"{', ' + PHASE_LOGS[phase] if phase in PHASE_LOGS else ''})"))
        call = [s for n, s in times if n == "call"]
        rows.append(("elapsed", None, ", ".join(f"{n} {s} s" for n, s in times if n != "call")
                     + (f"; the call {call[-1]} s (memcheck runs beside parity)" if call else "")))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    results = sys.argv[1]
    rows = rows_of(results)
    env_path = os.path.join(results, "environment.txt")
    env = open(env_path).read().strip().splitlines() if os.path.exists(env_path) else []
    lines = ["dtrain GPU check" + (f": {env[1]}" if len(env) > 1 else "")]
    words = [ok if isinstance(ok, str) else "" if ok is None else "PASS" if ok else "FAIL" for _, ok, _ in rows]
    width = max([6] + [len(w) for w in words])
    item_width = max([32] + [len(n) for n, _, _ in rows])
    lines.append(f"{'item':{item_width}} {'result':{width}}  figures")
    for (name, ok, text), word in zip(rows, words):
        lines.append(f"{name:{item_width}} {word:{width}}  {text}")
    if not rows:
        lines.append("(no results yet)")
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(results, "summary.txt"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump([{"item": n, "pass": None, "result": ok, "figures": t} if isinstance(ok, str) else
                   {"item": n, "pass": ok, "figures": t} for n, ok, t in rows], f, indent=1)
    sys.exit(1 if any(ok is False for _, ok, _ in rows) else 0)


if __name__ == "__main__":
    main()
