"""Tests of mosaic's process runtime. Shared fixtures are in conftest.py."""
