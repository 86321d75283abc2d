"""Tests for skills.text_diff, run by core/workspace's Go tests with
/usr/bin/python3 and PYTHONPATH set as in a sandbox."""

import os
import shutil
import subprocess
import tempfile
import unittest

from skills.text_diff import changes, diff, diff_files, stats, word_diff

HERE = os.path.dirname(os.path.abspath(__file__))
V1 = os.path.join(HERE, "testdata", "config_v1.ini")
V2 = os.path.join(HERE, "testdata", "config_v2.ini")


def read(path):
    with open(path) as f:
        return f.read()


class TextDiffTest(unittest.TestCase):
    def test_unified(self):
        out = diff(read(V1), read(V2), from_name="v1", to_name="v2", context=1)
        self.assertEqual(out, (
            "--- v1\n+++ v2\n"
            "@@ -2,3 +2,3 @@\n host = 0.0.0.0\n-port = 8080\n+port = 9090\n workers = 4\n"
            "@@ -7,3 +7,4 @@\n url = postgres://db/app\n-pool = 10\n+pool = 20\n timeout = 30\n+ssl = true\n"))

    @unittest.skipUnless(shutil.which("diff"), "no diff(1) to compare with")
    def test_same_as_diff_u(self):
        cases = [(read(V1), read(V2)), ("a\nb\nc", "a\nB\nc"), ("x\n", "x"), ("", "new\n"), ("same\n", "same\n")]
        for a, b in cases:
            with self.subTest(a=a, b=b), tempfile.TemporaryDirectory() as tmp:
                pa, pb = os.path.join(tmp, "a"), os.path.join(tmp, "b")
                with open(pa, "w") as f:
                    f.write(a)
                with open(pb, "w") as f:
                    f.write(b)
                want = subprocess.run(["diff", "-u", "--label", "a", "--label", "b", pa, pb],
                                      capture_output=True, text=True).stdout
                self.assertEqual(diff(a, b), want)

    def test_files_and_equal(self):
        self.assertTrue(diff_files(V1, V2).startswith(f"--- {V1}\n+++ {V2}\n"))
        self.assertEqual(diff_files(V1, V1), "")

    def test_ignore_whitespace(self):
        a, b = "x =  1\ny = 2\n", "x = 1  \ny = 3\n"
        self.assertEqual(diff(a, b, ignore_whitespace=True), "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x =  1\n-y = 2\n+y = 3\n")
        self.assertEqual(diff("a  b\n", "a b\n", ignore_whitespace=True), "")

    def test_changes(self):
        got = changes(read(V1), read(V2))
        self.assertEqual([c["op"] for c in got], ["replace", "replace", "insert"])
        self.assertEqual(got[0], {"op": "replace", "a": [3, 4], "b": [3, 4], "old": ["port = 8080"], "new": ["port = 9090"]})
        self.assertEqual(got[2]["new"], ["ssl = true"])

    def test_word_diff(self):
        self.assertEqual(word_diff("the quick brown fox", "the slow brown fox"), "the [-quick-]{+slow+} brown fox")
        self.assertEqual(word_diff("a b", "a b c"), "a b{+ c+}")

    def test_stats(self):
        s = stats(read(V1), read(V2))
        self.assertEqual((s["added"], s["removed"], s["changed_regions"], s["identical"]), (3, 2, 3, False))
        self.assertGreater(s["similarity"], 0.7)
        self.assertEqual(stats("", "")["similarity"], 1.0)
        self.assertTrue(stats(["a", "b"], "a\nb\n")["identical"])


if __name__ == "__main__":
    unittest.main()
