"""``langorch test [WORKFLOW|FILE…]``: run workflows' tests as data, offline (README "Testing
workflows")."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langorch.cli.context import Context
from langorch.cli.registry import Subparsers, add_command

if TYPE_CHECKING:
    from langorch.local.workflow_tests import CaseResult


def register(subparsers: Subparsers) -> None:
    """Add the ``test`` command."""
    test = add_command(
        subparsers, "test", _test, "run workflow tests (tests.yaml) offline: no AWS, no network"
    )
    test.add_argument(
        "targets",
        nargs="*",
        metavar="WORKFLOW|FILE",
        help="tests files, or folders holding a tests.yaml (default: examples/*/tests.yaml)",
    )
    test.add_argument("-k", dest="only", metavar="TEXT", help="only cases whose name has TEXT")
    test.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")


def _test(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.local.workflow_tests import find_tests_files, run_file

    results: list[CaseResult] = []
    for path in find_tests_files(list(args.targets)):
        for result in run_file(path, only=args.only):
            results.append(result)
            if not ctx.out.json_mode:
                print(_line(result), file=ctx.out.stdout, flush=True)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results), encoding="utf-8")
    failed = [r for r in results if not r.passed]
    ctx.out.result(
        {
            "cases": [_json(r) for r in results],
            "passed": len(results) - len(failed),
            "failed": len(failed),
        },
        lambda: _summary(results, failed),
    )
    return 1 if failed or not results else 0


def _line(result: CaseResult) -> str:
    mark = "PASS" if result.passed else "FAIL"
    return f"{mark}  {result.file} :: {result.name}  ({result.seconds:.2f} s)"


def _details(result: CaseResult) -> list[str]:
    lines: list[str] = []
    if result.error:
        lines.append(f"    could not run: {result.error}")
    for mismatch in result.mismatches:
        lines += ["    " + line for line in mismatch.render().splitlines()]
    observed = result.observed
    if observed is not None and not result.passed:
        lines.append(f"    the run: {observed.status}, path {' > '.join(observed.path) or '-'}")
        if observed.error:
            lines.append(f"    its error: {observed.error}")
    for note in observed.notes if observed else []:
        lines.append(f"    note: {note}")
    return lines


def _summary(results: list[CaseResult], failed: list[CaseResult]) -> str:
    if not results:
        return "no cases ran (no tests.yaml found, or -k matched none)"
    lines: list[str] = []
    for result in failed:
        lines += [f"FAIL  {result.file} :: {result.name}", *_details(result), ""]
    lines.append(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return "\n".join(lines)


def _json(result: CaseResult) -> dict[str, Any]:
    observed = result.observed
    return {
        "file": result.file,
        "case": result.name,
        "passed": result.passed,
        "error": result.error,
        "mismatches": [
            {"what": m.what, "expected": m.expected, "actual": m.actual} for m in result.mismatches
        ],
        "run": None
        if observed is None
        else {
            "status": observed.status,
            "path": observed.path,
            "cost_usd": observed.cost_usd,
            "approvals": observed.approvals,
            "notes": observed.notes,
        },
        "seconds": round(result.seconds, 3),
    }


def junit_xml(results: list[CaseResult]) -> str:
    """The results as JUnit XML: one ``testsuite`` per tests file, one ``testcase`` per case."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="langorch test")
    suites: dict[str, ET.Element] = {}
    for result in results:
        suite = suites.get(result.file)
        if suite is None:
            suite = suites[result.file] = ET.SubElement(root, "testsuite", name=result.file)
        case = ET.SubElement(
            suite,
            "testcase",
            classname=result.file,
            name=result.name,
            time=f"{result.seconds:.3f}",
        )
        if not result.passed:
            kind = "error" if result.error else "failure"
            message = result.error or "; ".join(m.what for m in result.mismatches)
            ET.SubElement(case, kind, message=message).text = "\n".join(_details(result))
    for file, suite in suites.items():
        mine = [r for r in results if r.file == file]
        suite.set("tests", str(len(mine)))
        suite.set("failures", str(sum(1 for r in mine if r.mismatches and not r.error)))
        suite.set("errors", str(sum(1 for r in mine if r.error)))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
