"""Run natively: python3 -m unittest discover -s tests"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import translator  # noqa: E402


class Cluster(unittest.TestCase):
    def test_endpoint(self) -> None:
        c = translator.cluster("web", {"spec": {"address": "10.0.0.1", "port": 8080}})
        self.assertEqual(c["type"], "STATIC")
        self.assertEqual(c["load_assignment"]["cluster_name"], "web")

    def test_bad_port(self) -> None:
        for spec in [{"address": "10.0.0.1"}, {"address": "10.0.0.1", "port": 0}, {"address": "10.0.0.1", "port": 70000}]:
            with self.assertRaises(translator.Invalid) as caught:
                translator.cluster("web", {"spec": spec})
            self.assertEqual(caught.exception.field, "spec.port")

    def test_missing_address(self) -> None:
        with self.assertRaises(translator.Invalid) as caught:
            translator.cluster("web", {"spec": {"port": 80}})
        self.assertEqual(caught.exception.field, "spec.address")


if __name__ == "__main__":
    unittest.main()
