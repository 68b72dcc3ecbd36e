"""Print one closing line for all test tiers: 'tests: N passed, N failed, N skipped'."""

import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for s in suites:
        total = int(s.get("tests", 0))
        f = int(s.get("failures", 0)) + int(s.get("errors", 0))
        sk = int(s.get("skipped", 0))
        failed += f
        skipped += sk
        passed += total - f - sk
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
