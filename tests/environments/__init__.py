"""Tests of mosaic.environments."""
