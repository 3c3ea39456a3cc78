"""Reads agentloop eval's JUnit XML with the junitparser package and prints what it found, as
JSON: each test case's name, whether it passed, and its failure message."""
import json
import sys

from junitparser import JUnitXml

cases = []
for suite in JUnitXml.fromfile(sys.argv[1]):
    for case in suite:
        failures = [result.message for result in case.result]
        cases.append({"name": case.name, "passed": case.is_passed, "failures": failures})
print(json.dumps(cases))
