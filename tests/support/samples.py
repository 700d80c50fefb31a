"""Where the spec's sample files are: `shared/spec/samples` beside the checkout (CI's clone has a
copy of shared/ beside it), else the workplace's own copy; tests that read them skip when neither
is there (a clone made elsewhere by hand)."""

from pathlib import Path

import pytest

_CANDIDATES = (
    Path(__file__).resolve().parents[3] / "shared" / "spec" / "samples",
    Path("/work/shared/spec/samples"),
)
SAMPLES = next((path for path in _CANDIDATES if path.is_dir()), _CANDIDATES[0])
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared/spec/samples not present")
