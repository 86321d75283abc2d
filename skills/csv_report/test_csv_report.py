"""Tests for skills.csv_report, run by core/workspace's Go tests with
/usr/bin/python3 and PYTHONPATH set as in a sandbox."""

import os
import unittest

from skills.csv_report import format_report, run, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
SALES = os.path.join(HERE, "testdata", "sales.csv")


def column(summary, name):
    return next(c for c in summary["columns"] if c["name"] == name)


class CSVReportTest(unittest.TestCase):
    def test_file(self):
        s = run(SALES)
        self.assertEqual(s["rows"], 8)
        self.assertEqual(s["delimiter"], ",")
        self.assertEqual([c["name"] for c in s["columns"]],
                         ["order_id", "date", "region", "product", "units", "unit_price", "returned"])
        units = column(s, "units")
        self.assertEqual((units["type"], units["missing"], units["min"], units["max"], units["sum"]),
                         ("int", 1, 1, 10, 32))
        self.assertAlmostEqual(units["mean"], 32 / 7)
        self.assertEqual(units["median"], 4)
        price = column(s, "unit_price")
        self.assertEqual(price["type"], "float")
        self.assertAlmostEqual(price["max"], 19.99)
        date = column(s, "date")
        self.assertEqual((date["type"], date["min"], date["max"]), ("date", "2026-01-03", "2026-01-08"))
        region = column(s, "region")
        self.assertEqual(region["type"], "text")
        self.assertEqual(region["top"][0], ["north", 4])
        returned = column(s, "returned")
        self.assertEqual((returned["type"], returned["missing"]), ("bool", 1))

    def test_rows_from_a_tool(self):
        rows = [{"name": "a", "score": 1.5}, {"name": "b", "score": None, "extra": "x"}, {"name": "a", "score": 3}]
        s = summarize(rows)
        self.assertEqual(s["rows"], 3)
        score = column(s, "score")
        self.assertEqual((score["type"], score["missing"], score["max"]), ("float", 1, 3.0))
        self.assertEqual(column(s, "extra")["missing"], 2)

    def test_text_semicolons_and_ragged_rows(self):
        s = summarize("a;b\n1;x\n2\n3;y;z\n")
        self.assertEqual(s["rows"], 3)
        self.assertEqual(s["ragged_rows"], 2)
        self.assertEqual(column(s, "b")["missing"], 1)

    def test_duplicate_and_blank_headers(self):
        s = summarize("x,x,\n1,2,3\n")
        self.assertEqual([c["name"] for c in s["columns"]], ["x", "x_2", "column_3"])

    def test_empty(self):
        self.assertEqual(summarize(""), {"rows": 0, "columns": []})

    def test_report(self):
        text = format_report(run(SALES))
        self.assertTrue(text.startswith("8 rows x 7 columns"))
        self.assertIn("- units (int): 1 missing, 7 unique; min 1, max 10", text)
        self.assertIn("top 'north' x4", text)


if __name__ == "__main__":
    unittest.main()
