"""Tests of mosaic.tracking."""
