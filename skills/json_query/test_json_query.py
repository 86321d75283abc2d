"""Tests for skills.json_query, run by core/workspace's Go tests with
/usr/bin/python3 and PYTHONPATH set as in a sandbox."""

import json
import os
import unittest

from skills.json_query import PathError, find, get, project, query, unwrap

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "testdata", "issues.json")) as f:
    ISSUES = json.load(f)


class JSONQueryTest(unittest.TestCase):
    def test_paths(self):
        cases = [
            ("total_count", [4]),
            ("items[0].id", [101]),
            ("items[-1].id", [104]),
            ("items[*].user.login", ["ana", "bo", "ana"]),  # user null: no login
            ("items.*.id", [101, 102, 103, 104]),
            ("items[?state==open].id", [101, 103, 104]),
            ("items[?state!=open].title", ["Docs typo"]),
            ("items[?comments>=7].id", [101, 104]),
            ("items[?labels].id", [101, 103, 104]),
            ("items[?user.login==ana].id", [101, 103]),
            ("items[*].labels[*].name", ["bug", "p1", "perf", "feature"]),
            ('items[3]["meta.v2"].votes', [40]),
            ("items[9].id", []),
            ("nope.deeper", []),
            ("$.items[1].id", [102]),
            ("", [ISSUES]),
        ]
        for path, want in cases:
            with self.subTest(path=path):
                self.assertEqual(query(ISSUES, path), want)

    def test_deep(self):
        self.assertEqual(query(ISSUES, "**.login"), ["ana", "bo", "ana"])
        self.assertEqual(len(query(ISSUES, "**.id")), 4)

    def test_get_and_default(self):
        self.assertEqual(get(ISSUES, "items[1].user.login"), "bo")
        self.assertEqual(get(ISSUES, "items[1].milestone", "none"), "none")

    def test_project(self):
        rows = project(ISSUES, {"id": "id", "by": "user.login", "first_label": "labels[0].name"}, path="items[*]")
        self.assertEqual(rows[0], {"id": 101, "by": "ana", "first_label": "bug"})
        self.assertEqual(rows[1], {"id": 102, "by": "bo", "first_label": None})
        self.assertEqual(project({"a": 1, "b": 2}, ["a"]), [{"a": 1}])

    def test_find(self):
        self.assertEqual(find(ISSUES, "name"), ["bug", "p1", "perf", "feature"])

    def test_unwrap_mcp_results(self):
        text_result = {"content": [{"type": "text", "text": json.dumps(ISSUES)}], "isError": False}
        self.assertEqual(query(text_result, "items[0].id"), [101])
        structured = {"content": [{"type": "text", "text": "ignored"}], "structuredContent": {"x": [1, 2]}}
        self.assertEqual(query(structured, "x[1]"), [2])
        self.assertEqual(unwrap('{"a": 1}'), {"a": 1})
        self.assertEqual(unwrap("plain text"), "plain text")
        self.assertEqual(unwrap({"content": "not a tool result"}), {"content": "not a tool result"})

    def test_bad_paths(self):
        for path in ["a..b", "a.", "items[?]", ".a"]:
            with self.subTest(path=path):
                with self.assertRaises(PathError):
                    query(ISSUES, path)


if __name__ == "__main__":
    unittest.main()
