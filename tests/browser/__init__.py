"""Helpers for the browser tests in ``tests/test_browser.py``: JupyterLab servers started as a learner
starts them, Chromium driven through Playwright, and the small notebooks the tests generate."""
