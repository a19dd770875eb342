"""The names of the files in a published findings folder, shared by the code that writes the
folder (presentation/publish.py), reads it back (presentation/published.py) and links to it
from Markdown (presentation/findings_boolean.py, findings_symmetry.py)."""

FIGURE = "m_star_vs_T.png"
TRIALS, RUNS, SUMS = "trials.parquet", "runs.parquet", "SHA256SUMS"
