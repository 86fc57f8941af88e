"""mosaic.operators."""
