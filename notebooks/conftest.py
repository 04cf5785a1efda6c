"""Notebooks run as tests (nbval) run to their end: their solution cells apply the reference solutions.

A learner's "Run All" does not (see ``Lab.show_solution``); a test run, even of one notebook alone
(``./course test notebooks/23-job-like.ipynb``), does. The notebook kernels inherit this setting.
"""

import os

os.environ.setdefault("KRMCOURSE_SOLUTIONS", "apply")
