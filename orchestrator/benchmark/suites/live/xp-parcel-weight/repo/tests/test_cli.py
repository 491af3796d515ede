import contextlib
import io
import unittest

from shipquote.cli import main


def run(*argv):
    with contextlib.redirect_stdout(io.StringIO()):
        return main(list(argv))


class QuoteTest(unittest.TestCase):
    def test_metric_parcel(self):
        self.assertEqual(run("3.2kg", "40x30x20cm", "--to", "M5V 2T6"),
                         "Zone 1, chargeable weight 4.8 kg: $10.20")

    def test_parcel_in_pounds(self):
        self.assertEqual(run("4lb", "30x20x10cm", "--to", "K1A 0B1"),
                         "Zone 2, chargeable weight 1.9 kg: $9.80")

    def test_light_but_bulky(self):
        self.assertEqual(run("0.5kg", "20x20x20in", "--to", "V6B 1A1"),
                         "Zone 3, chargeable weight 26.3 kg: $66.90")

    def test_insured(self):
        self.assertEqual(run("1kg", "10x10x10cm", "--to", "M4C 1B5", "--value", "250"),
                         "Zone 1, chargeable weight 1.0 kg: $10.40 (incl. $3.00 insurance)")

    def test_too_heavy(self):
        self.assertEqual(run("80lb", "50x40x40cm", "--to", "M4C 1B5"), "")


if __name__ == "__main__":
    unittest.main()
