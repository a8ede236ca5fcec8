#!/usr/bin/env python3
"""The summary of a GPU machine check (tools/device-check.sh) from its logs.

Reads, in the check's output folder:
  stages.tsv        one line per stage: name, verdict (ok, failed, timed-out,
                    skipped), seconds, log file, what the stage covers (a
                    ctest label, or empty)
  preflight.txt     the preflight's one line (the device, or why there is none)
  expected-*.json   `ctest --show-only=json-v1 -L <label>`: every test a label holds
  junit-*.xml       `ctest --output-junit` of each test stage
  *.log             the stages' output (ctest's progress lines, the benchmarks'
                    JSON lines, compute-sanitizer's summaries)
and writes the summary to standard output: every stage with its verdict and
the stages never reached; every test of the `cuda` label with its verdict
(passed, FAILED, skipped and why, or not run and which stage would have run
it); a line that starts with "!!!" when no CUDA test ran on a device (all
skipped, or none run); the benchmark figures; the sanitizer verdicts.

Usage: device_check_report.py OUT_DIR [--header LINE]
"""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ElementTree

# ctest's progress line for one test: "  3/96 Test  #77: name ....   Passed   18.41 sec"
PROGRESS = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(Passed|Failed|Skipped|Timeout|Not Run|"
                      r"Exception: [^\d]+|SEGFAULT|Subprocess aborted|Child aborted)")
RED = "!!!"


def read_stages(out):
    stages = []
    path = os.path.join(out, "stages.tsv")
    if not os.path.exists(path):
        return stages
    for line in open(path, encoding="utf-8", errors="replace"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 4:
            continue
        name, verdict, seconds, log = fields[:4]
        label = fields[4] if len(fields) > 4 else ""
        stages.append({"name": name, "verdict": verdict, "seconds": seconds, "log": log, "label": label})
    return stages


def expected_tests(out, label):
    """Every test `label` holds, with its labels, from ctest --show-only=json-v1."""
    path = os.path.join(out, "expected-%s.json" % label)
    if not os.path.exists(path):
        return None
    try:
        data = json.load(open(path, encoding="utf-8"))
    except ValueError:
        return None
    tests = {}
    for test in data.get("tests", []):
        labels = []
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels = prop.get("value", [])
        tests[test["name"]] = labels
    return tests


def after_marker(text, marker):
    """The line after gtest's "file:line: <marker>" line (the message, past
    FAIL()'s own "Failed"), or None."""
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": " + marker):
            for following in lines[i + 1:]:
                if following.strip() and following.strip() != "Failed":
                    return following.strip()[:200]
    return None


def skip_reason(text):
    reason = after_marker(text, "Skipped")
    if reason:
        return reason
    for line in (text or "").splitlines():
        if line.strip() and not line.startswith("["):
            return line.strip()[:200]
    return ""


def failure_reason(text):
    reason = after_marker(text, "Failure")
    if reason:
        return reason
    for line in (text or "").splitlines():
        if re.search(r"error|Error|abort|CUDA emulator|what\(\)|Segmentation", line):
            return line.strip()[:200]
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def junit_results(out):
    results = {}
    for path in sorted(glob.glob(os.path.join(out, "junit-*.xml"))):
        try:
            root = ElementTree.parse(path).getroot()
        except (ElementTree.ParseError, OSError):
            continue
        for case in root.iter("testcase"):
            name = case.get("name")
            output = case.findtext("system-out") or ""
            if case.find("failure") is not None or case.get("status") == "fail":
                results[name] = ("FAILED", failure_reason(output))
            elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
                results[name] = ("skipped", skip_reason(output))
            else:
                results[name] = ("passed", "")
    return results


def progress_results(out):
    """Verdicts from ctest's progress lines: what a stage killed before its junit file got."""
    results = {}
    for path in sorted(glob.glob(os.path.join(out, "*.log"))):
        for line in open(path, encoding="utf-8", errors="replace"):
            match = PROGRESS.match(line)
            if not match:
                continue
            verdict = match.group(3)
            if verdict == "Passed":
                results[match.group(1)] = ("passed", "")
            elif verdict in ("Skipped", "Not Run"):
                results[match.group(1)] = ("skipped", "(see %s)" % os.path.basename(path))
            else:
                results[match.group(1)] = ("FAILED", "%s (see %s)" % (verdict.strip(), os.path.basename(path)))
    return results


def stage_for(labels, stages):
    """The stage that runs a test with these labels: the most specific label first."""
    for stage in stages:
        if stage["label"] and stage["label"] in labels and stage["label"] != "cuda":
            return stage
    for stage in stages:
        if stage["label"] in labels:
            return stage
    return None


def report_tests(out, stages, lines, label, every_test):
    """Counts for `label`; with every_test, each test's verdict and the red lines."""
    expected = expected_tests(out, label)
    results = progress_results(out)
    results.update(junit_results(out))
    if expected is None:
        if every_test:
            lines.append("%s the list of %s tests is missing (expected-%s.json): the tests were never set up "
                         "(no carried binaries, no build)" % (RED, label.upper(), label))
        return
    counts = {"passed": 0, "FAILED": 0, "skipped": 0, "not run": 0}
    rows = []
    for name in sorted(expected):
        verdict, detail = results.get(name, ("not run", ""))
        if verdict == "not run":
            stage = stage_for(expected[name], stages)
            if stage is None:
                detail = "no stage of this check runs it"
            elif stage["verdict"] == "ok":
                detail = "its stage (%s) ended without it" % stage["name"]
            else:
                detail = "its stage (%s) %s (%s)" % (stage["name"], stage["verdict"], stage["log"])
        counts[verdict] += 1
        if every_test or verdict != "passed":
            rows.append("  %-8s %s%s" % (verdict, name, ("  -- " + detail) if detail else ""))
    total = len(expected)
    lines.append("%s tests (label %s): %d: %d passed, %d FAILED, %d skipped, %d not run" %
                 (label.upper(), label, total, counts["passed"], counts["FAILED"], counts["skipped"],
                  counts["not run"]))
    if every_test:
        ran = counts["passed"] + counts["FAILED"]
        if total == 0:
            lines.append("%s the %s label holds no tests in this build" % (RED, label))
        elif ran == 0 and counts["skipped"] > 0:
            lines.append("%s ALL %d %s TESTS SKIPPED (none ran on a device): this run proves nothing about the GPU" %
                         (RED, counts["skipped"], label.upper()))
        elif ran == 0:
            lines.append("%s NO %s TEST RAN: this run proves nothing about the GPU" % (RED, label.upper()))
        elif counts["FAILED"]:
            lines.append("%s %d %s tests FAILED" % (RED, counts["FAILED"], label.upper()))
    lines.extend(rows)


def report_bench(out, lines):
    path = os.path.join(out, "bench.log")
    if not os.path.exists(path):
        return
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("[bench]") or line.startswith("[bf16 cache]"):
            lines.append("  " + line.rstrip())
            continue
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        # cubeforge-lab's report: {"command", "machine", "results"}.
        if r.get("command") != "bench":
            continue
        r = r.get("results", {})
        if "modes" not in r:
            continue
        lines.append("  bench %s on %s, weights %s, KV cache %s%s: %s steps, floor %.3f ms, device read %.0f GB/s, "
                     "%.2f GB of weights per token" %
                     (r.get("model"), r.get("backend_description", r.get("backend")), r.get("weights", "stored"),
                      r.get("kv_cache", "f32"), ", budget %s" % r["kv_budget"] if r.get("kv_budget") else "",
                      r.get("steps"), r.get("floor_ms", 0.0), r.get("memory_read_gbps", 0.0),
                      r.get("decode_weight_bytes", 0.0) / 1e9))
        for m in r.get("modes", []):
            lines.append("    %-9s prefill %8.2f ms  TPOT median %.3f / p90 %.3f ms  %.0f GB/s = %.0f%% of the floor  "
                         "%s launches/step  %s" %
                         (m.get("mode"), m.get("prefill_ms", 0.0), m.get("tpot_ms_median", 0.0),
                          m.get("tpot_ms_p90", 0.0), m.get("weight_gbps", 0.0),
                          100 * m.get("bandwidth_fraction", 0.0), m.get("kernel_launches_per_step"),
                          "graph" if m.get("graph_replay") else "eager"))


def report_sanitizer(out, lines):
    path = os.path.join(out, "sanitizer.log")
    if not os.path.exists(path):
        return
    summaries = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        if re.search(r"ERROR SUMMARY|RACECHECK SUMMARY|========= (Invalid|Race|Barrier|Uninitialized)", line):
            key = line.strip()
            summaries[key] = summaries.get(key, 0) + 1
    for key, count in list(summaries.items())[:20]:
        lines.append("  sanitizer: %s%s" % (key, " (x%d)" % count if count > 1 else ""))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    lines = []
    if "--header" in sys.argv:
        lines.append(sys.argv[sys.argv.index("--header") + 1])
    preflight = os.path.join(out, "preflight.txt")
    if os.path.exists(preflight):
        lines.extend(line.rstrip() for line in open(preflight, encoding="utf-8", errors="replace"))
    stages = read_stages(out)
    lines.append("stages:")
    not_reached = []
    for stage in stages:
        if stage["verdict"] == "skipped":
            not_reached.append(stage["name"])
        lines.append("  %-10s %-48s %4ss  %s" % (stage["verdict"], stage["name"], stage["seconds"], stage["log"]))
    if not_reached:
        lines.append("stages not reached: " + ", ".join(not_reached))
    report_tests(out, stages, lines, "cuda", every_test=True)
    report_tests(out, stages, lines, "vulkan", every_test=False)
    report_bench(out, lines)
    report_sanitizer(out, lines)
    usage = os.path.join(out, "resource-usage.txt")
    if os.path.exists(usage):
        rows = [line.rstrip() for line in open(usage, encoding="utf-8", errors="replace") if line.strip()]
        spilling = [row for row in rows if not re.search(r"spill stores +0 B +loads +0 B", row)]
        lines.append("registers and spills per kernel (ptxas, where the binaries were built): resource-usage.txt, "
                     "%d kernels, %d spilling" % (len(rows), len(spilling)))
        lines.extend("  " + row for row in (rows[:5] + [r for r in spilling if r not in rows[:5]][:5]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
