#!/usr/bin/env python3
"""Counts what a GoogleTest run did, from its --gtest_output=json:FILE report,
and fails unless every selected test ran and passed.

    gtest_summary.py [--name NAME] REPORT.json

Prints one line, "NAME: R run, F failed, S skipped, D disabled (T selected)",
then the failed and the skipped tests by name (the first 20 of each), and
exits 1 when any test failed, any test skipped (GTEST_SKIP: on a GPU machine
a skip means something was not tested), no test ran (a filter that matched
nothing), or the report is missing or unreadable (the program crashed or was
killed before gtest wrote it); else 0. Disabled tests (DISABLED_, never run
unless asked) are counted and named but do not fail the run.

scripts/gpu-check.sh runs it after each gtest program; tests/python/
test_gpu_check_helpers.py tests it on reports of gtest 1.12.
"""

import argparse
import json
import sys

SHOWN = 20


def summarize(report):
    """(run, failed, skipped, disabled) test names of a parsed gtest JSON report."""
    run, failed, skipped, disabled = [], [], [], []
    for suite in report.get("testsuites", []):
        for test in suite.get("testsuite", []):
            name = f"{suite.get('name', '?')}.{test.get('name', '?')}"
            status, result = test.get("status"), test.get("result")
            if test.get("failures"):
                failed.append(name)
            if status == "NOTRUN" or result == "SUPPRESSED":
                disabled.append(name)
            elif result == "SKIPPED":
                skipped.append(name)
            elif status == "RUN":
                run.append(name)
    return run, failed, skipped, disabled


def check(path, name):
    """Prints the summary of the report at `path`; returns the problems found."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError:
        return [f"no report at {path}: the program crashed or was killed before the end"]
    except (OSError, ValueError) as e:
        return [f"unreadable report {path}: {e}"]
    if not isinstance(report, dict) or "testsuites" not in report:
        return [f"{path} is not a gtest JSON report"]
    run, failed, skipped, disabled = summarize(report)
    # Failures outside any test (a suite's SetUpTestSuite, a global
    # environment) show only in the totals.
    n_failed = max(len(failed), int(report.get("failures", 0) or 0))
    selected = len(run) + len(skipped) + len(disabled)
    print(f"{name}: {len(run)} run, {n_failed} failed, {len(skipped)} skipped, "
          f"{len(disabled)} disabled ({selected} selected)")
    for label, names in (("failed", failed), ("skipped", skipped), ("disabled", disabled)):
        for n in names[:SHOWN]:
            print(f"  {label}: {n}")
        if len(names) > SHOWN:
            print(f"  ... and {len(names) - SHOWN} more {label}")
    problems = []
    if n_failed:
        problems.append(f"{n_failed} test(s) failed")
    if skipped:
        problems.append(f"{len(skipped)} test(s) skipped: a skipped test tested nothing")
    if not run:
        problems.append("no test ran: the filter matched no test" if selected == 0 else "no test ran")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="the file of --gtest_output=json:FILE")
    parser.add_argument("--name", default="gtest", help="what to call the run in the output")
    args = parser.parse_args(argv)
    problems = check(args.report, args.name)
    for p in problems:
        print(f"{args.name}: FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
