"""mosaic.actors."""
