"""The fuzz tier: generated model outputs through extract and submit (``make fuzz``).

A small fixed-seed sample of it runs in ``make test`` (test_fuzz_sample.py).
"""
