"""Tests of mosaic.store."""
