"""Where the spec's sample files are: `shared/spec/samples` beside the checkout (absent in a clone
made elsewhere, where the tests that need them skip)."""

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "spec" / "samples"
